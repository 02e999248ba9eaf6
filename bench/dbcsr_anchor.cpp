// Anchor for the benchmarks: the same product with DBCSR (its C API, float64 blocks of the same
// size m, the same MPI ranks and OpenMP threads), written as a COL380 file that blockmm-cmp
// checks against blockmm's output. Exact: every input is an integer below 2^16, so every sum is
// an integer; float64 holds it exactly while it stays below 2^53, which is checked up front
// (row length x m x (2^16 - 1)^2). The product is saturated at 2^32 - 1 on output.
//
// Usage: mpiexec -n P dbcsr_anchor A.bin B.bin C.bin   (threads: OMP_NUM_THREADS)
// Prints one JSON line (rank 0): read, multiply, write and total seconds, and the blocks written.
// Every rank reads both files and puts only the blocks DBCSR stores on it; the multiply time
// is c_dbcsr_multiply_d between barriers.
#include <dbcsr.h>
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// CPU seconds of this process (all its threads): the steadier figure on a loaded machine.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Col380 {
  std::int32_t n = 0, m = 0;
  std::vector<std::int32_t> i, j;
  std::vector<std::uint16_t> values;  // m*m a block, row-major
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

Col380 read_col380(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string(path) + ": cannot open");
  std::int32_t header[3];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) fail(std::string(path) + ": truncated header");
  Col380 c;
  c.n = header[0];
  c.m = header[1];
  const std::int32_t k = header[2];
  if (c.m < 1 || c.n < 1 || c.n % c.m != 0 || k < 0) fail(std::string(path) + ": bad header");
  const std::int64_t mm = std::int64_t{c.m} * c.m;
  const std::int32_t p = c.n / c.m;
  c.i.resize(static_cast<std::size_t>(k));
  c.j.resize(static_cast<std::size_t>(k));
  c.values.resize(static_cast<std::size_t>(k * mm));
  for (std::int32_t q = 0; q < k; ++q) {
    std::int32_t ij[2];
    if (!in.read(reinterpret_cast<char*>(ij), sizeof ij) ||
        !in.read(reinterpret_cast<char*>(c.values.data() + q * mm), static_cast<std::streamsize>(mm * 2)))
      fail(std::string(path) + ": truncated at block " + std::to_string(q));
    if (ij[0] < 0 || ij[0] >= p || ij[1] < 0 || ij[1] >= p)
      fail(std::string(path) + ": block index out of range at block " + std::to_string(q));
    c.i[static_cast<std::size_t>(q)] = ij[0];
    c.j[static_cast<std::size_t>(q)] = ij[1];
  }
  if (in.peek() != std::char_traits<char>::eof()) fail(std::string(path) + ": trailing bytes after the last block");
  return c;
}

// Creates a DBCSR matrix of p x p blocks of size m on `dist` holding this rank's blocks of `c`.
dbcsr_matrix make_matrix(const char* name, dbcsr_distribution dist, std::int32_t p, std::int32_t m, const Col380* c,
                         int rank) {
  std::vector<int> sizes(static_cast<std::size_t>(p), m);
  const int type = dbcsr_type_real_8;
  dbcsr_matrix matrix = nullptr;
  c_dbcsr_create_new(&matrix, name, dist, dbcsr_type_no_symmetry, sizes.data(), p, sizes.data(), p, nullptr, &type,
                     nullptr, nullptr, nullptr, nullptr);
  if (c != nullptr) {
    const std::int64_t mm = std::int64_t{m} * m;
    std::vector<double> block(static_cast<std::size_t>(mm));
    for (std::size_t q = 0; q < c->i.size(); ++q) {
      int owner = -1;
      c_dbcsr_get_stored_coordinates(matrix, c->i[q], c->j[q], &owner);
      if (owner != rank) continue;
      const std::uint16_t* v = c->values.data() + static_cast<std::int64_t>(q) * mm;
      if (std::all_of(v, v + mm, [](std::uint16_t x) { return x == 0; })) continue;  // contributes nothing
      for (std::int32_t r = 0; r < m; ++r)  // DBCSR blocks are column-major
        for (std::int32_t col = 0; col < m; ++col) block[static_cast<std::size_t>(col * m + r)] = v[r * m + col];
      const bool sum = true;  // a repeated (i, j) would add up; blockmm rejects it, so inputs must not have any
      c_dbcsr_put_block2d_d(matrix, c->i[q], c->j[q], block.data(), m, m, &sum, nullptr);
    }
  }
  c_dbcsr_finalize(matrix);
  return matrix;
}

int run(int argc, char** argv) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 4) {
    if (rank == 0) std::fprintf(stderr, "usage: mpiexec -n P dbcsr_anchor A.bin B.bin C.bin\n");
    return 2;
  }
  const double t0 = MPI_Wtime();
  const Col380 a = read_col380(argv[1]);
  const Col380 b = read_col380(argv[2]);
  if (a.n != b.n || a.m != b.m) fail("A and B differ in n or m");
  const std::int32_t m = a.m, p = a.n / a.m;
  // Exactness bound: a C value sums at most (blocks in an A row) * m products < 2^32 each.
  std::vector<std::int64_t> row_blocks(static_cast<std::size_t>(p), 0);
  for (std::int32_t i : a.i) ++row_blocks[static_cast<std::size_t>(i)];
  const double longest = static_cast<double>(*std::max_element(row_blocks.begin(), row_blocks.end()));
  if (longest * m * 65535.0 * 65535.0 >= 9007199254740992.0) fail("sums could exceed 2^53: float64 would not be exact");

  int dims[2] = {0, 0};
  MPI_Dims_create(ranks, 2, dims);
  int periods[2] = {1, 1};
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  c_dbcsr_init_lib(MPI_COMM_WORLD, nullptr);
  std::vector<int> row_dist(static_cast<std::size_t>(p)), col_dist(static_cast<std::size_t>(p));
  for (std::int32_t q = 0; q < p; ++q) {
    row_dist[static_cast<std::size_t>(q)] = q % dims[0];
    col_dist[static_cast<std::size_t>(q)] = q % dims[1];
  }
  dbcsr_distribution dist = nullptr;
  c_dbcsr_distribution_new(&dist, grid, row_dist.data(), p, col_dist.data(), p);
  dbcsr_matrix ma = make_matrix("A", dist, p, m, &a, rank);
  dbcsr_matrix mb = make_matrix("B", dist, p, m, &b, rank);
  dbcsr_matrix mc = make_matrix("C", dist, p, m, nullptr, rank);

  MPI_Barrier(MPI_COMM_WORLD);
  const double t1 = MPI_Wtime();
  const double cpu1 = cpu_seconds();
  long long flop = 0;
  c_dbcsr_multiply_d('N', 'N', 1.0, ma, mb, 0.0, mc, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                     nullptr, &flop);
  const double multiply_cpu = cpu_seconds() - cpu1;  // this rank's threads, before the barrier's wait
  MPI_Barrier(MPI_COMM_WORLD);
  const double t2 = MPI_Wtime();

  // This rank's C blocks as COL380 uint32 records (saturated, all-zero blocks dropped).
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t stride = 8 + 4 * mm;
  std::vector<char> mine;
  dbcsr_iterator it = nullptr;
  const bool read_only = true;
  c_dbcsr_iterator_start(&it, mc, nullptr, nullptr, nullptr, nullptr, &read_only);
  std::vector<std::uint32_t> rec(static_cast<std::size_t>(mm));
  while (c_dbcsr_iterator_blocks_left(it)) {
    int row = 0, col = 0, number = 0, rows = 0, cols = 0, row_offset = 0, col_offset = 0;
    double* block = nullptr;
    bool transposed = false;
    c_dbcsr_iterator_next_2d_block_d(it, &row, &col, &block, &transposed, &number, &rows, &cols, &row_offset,
                                     &col_offset);
    if (rows != m || cols != m) fail("DBCSR returned a block of another size");
    bool any = false;
    for (std::int32_t r = 0; r < m; ++r)
      for (std::int32_t c = 0; c < m; ++c) {
        const double v = transposed ? block[r * m + c] : block[c * m + r];
        if (v < 0 || v != std::floor(v)) fail("DBCSR returned a non-integer or negative value");
        const std::uint32_t s = v >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(v);
        rec[static_cast<std::size_t>(r * m + c)] = s;
        any |= s != 0;
      }
    if (!any) continue;
    const std::int32_t ij[2] = {row, col};
    mine.insert(mine.end(), reinterpret_cast<const char*>(ij), reinterpret_cast<const char*>(ij) + 8);
    mine.insert(mine.end(), reinterpret_cast<const char*>(rec.data()), reinterpret_cast<const char*>(rec.data()) + 4 * mm);
  }
  c_dbcsr_iterator_stop(&it);

  // Gather to rank 0, sort by (i, j), write.
  const int my_bytes = static_cast<int>(mine.size());
  if (static_cast<std::size_t>(my_bytes) != mine.size()) fail("a rank's output exceeds 2 GiB: not supported here");
  std::vector<int> counts(static_cast<std::size_t>(ranks)), offsets(static_cast<std::size_t>(ranks));
  MPI_Gather(&my_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<char> all;
  if (rank == 0) {
    std::int64_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
      total += counts[static_cast<std::size_t>(r)];
    }
    if (total > 2147483647) fail("the product exceeds 2 GiB: not supported here");
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), my_bytes, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::int64_t blocks = 0;
  if (rank == 0) {
    blocks = static_cast<std::int64_t>(all.size()) / stride;
    std::vector<std::int64_t> order(static_cast<std::size_t>(blocks));
    for (std::int64_t q = 0; q < blocks; ++q) order[static_cast<std::size_t>(q)] = q;
    auto key = [&](std::int64_t q) {
      std::int32_t ij[2];
      std::memcpy(ij, all.data() + q * stride, 8);
      return std::make_pair(ij[0], ij[1]);
    };
    std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return key(x) < key(y); });
    const std::string tmp = std::string(argv[3]) + ".tmp";
    std::FILE* out = std::fopen(tmp.c_str(), "wb");
    if (out == nullptr) fail(tmp + ": cannot create");
    const std::int32_t header[3] = {a.n, m, static_cast<std::int32_t>(blocks)};
    bool ok = std::fwrite(header, sizeof header, 1, out) == 1;
    for (std::int64_t q : order) ok = ok && std::fwrite(all.data() + q * stride, static_cast<std::size_t>(stride), 1, out) == 1;
    ok = std::fclose(out) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), argv[3]) != 0) {
      std::remove(tmp.c_str());
      fail(std::string(argv[3]) + ": write failed");
    }
  }
  const double t3 = MPI_Wtime();

  c_dbcsr_release(&ma);
  c_dbcsr_release(&mb);
  c_dbcsr_release(&mc);
  c_dbcsr_distribution_release(&dist);
  c_dbcsr_finalize_lib();
  MPI_Comm_free(&grid);
  if (rank == 0)
    std::printf("{\"read_and_build\": %.6f, \"multiply\": %.6f, \"multiply_cpu\": %.6f, \"write\": %.6f, "
                "\"total\": %.6f, \"blocks\": %lld, \"ranks\": %d}\n",
                t1 - t0, t2 - t1, multiply_cpu, t3 - t2, t3 - t0, static_cast<long long>(blocks), ranks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dbcsr_anchor: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return code;
}
