// HDF5 (BSR layout) inputs end to end, label "hdf5": they give the binary inputs' product on one
// rank and under mpiexec, an /indptr that claims a huge n costs memory by the blocks it holds (and
// chunks above the bound are refused), the order of blocks is checked across the ranks' shares,
// and files with a user block are read correctly.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "e2e/hdf5/hdf5_fixture.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// HDF5 inputs

TEST_F(Hdf5, Hdf5InputsGiveTheBinaryProduct) {
  std::mt19937_64 rng(41);
  const InputRecords a = testing::random_blocks(spec_of(45, 3, 0.3, 0.2), rng);  // shuffled records
  const InputRecords b = testing::random_blocks(spec_of(45, 3, 0.3), rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  ASSERT_TRUE(succeeded(run_convert({pa, in_dir + "/A.h5"})));
  ASSERT_TRUE(succeeded(run_convert({pb, in_dir + "/B.h5"})));
  // Inputs as another program would store them: chunked, compressed, int32 indptr (scipy's choice).
  Craft other = craft_from(a);
  other.indptr_type = H5T_STD_I32LE;
  other.chunked_gzip = H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0;
  other.data_type = H5T_STD_U16BE;
  write_craft(in_dir + "/A-other.h5", other);

  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, work + "/C.bin"})));
  const std::vector<std::byte> expected = read_bytes(work + "/C.bin");
  OutputRecords parsed;
  ASSERT_EQ(load(work + "/C.bin", parsed), "");
  EXPECT_EQ(parsed.bytes, sparse_oracle(a, b).bytes);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {in_dir + "/A.h5", in_dir + "/B.h5"}, {in_dir + "/A.h5", pb}, {pa, in_dir + "/B.h5"}, {in_dir + "/A-other.h5", pb}};
  for (const auto& [x, y] : pairs) {
    SCOPED_TRACE(x + " x " + y);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", x, y, work + "/D.bin"})));
    EXPECT_TRUE(read_bytes(work + "/D.bin") == expected);
  }
  // Several ranks: shares of the HDF5 blocks start inside rows.
  ASSERT_TRUE(succeeded(run_mpi(3, {"-q", in_dir + "/A.h5", in_dir + "/B.h5", work + "/E.bin"})));
  EXPECT_TRUE(read_bytes(work + "/E.bin") == expected);
}

// A BSR input written as h5py users write big arrays: /indptr chunked and deflated, `chunk`
// entries a chunk, written piece by piece, so that a file of n = 2^26 with a few blocks is a few
// MB on disk and in this process. `records` must be sorted by (i, j) and hold no duplicates.
void write_compressed_bsr(const std::string& path, const InputRecords& records, hsize_t chunk) {
  const std::int64_t p = records.shape.block_rows(), k = records.size(), mm = records.shape.block_values();
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0) << path;
  {
    const std::string format = "blockmm-bsr";
    Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(type.id, format.size());
    Handle space{H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, "format", type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
    ASSERT_GE(H5Awrite(attribute.id, type.id, format.data()), 0);
  }
  for (const auto& [name, value] : std::vector<std::pair<const char*, std::int64_t>>{
           {"version", 1}, {"n", records.shape.n}, {"m", records.shape.m}, {"nnzb", k}}) {
    Handle space{H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, name, H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
    ASSERT_GE(H5Awrite(attribute.id, H5T_NATIVE_INT64, &value), 0);
  }
  // /indptr: entry i counts the blocks of rows below i.
  std::vector<std::int64_t> starts;  // the rows' first blocks, in record order
  for (std::int64_t q = 0; q < k; ++q) starts.push_back(record_row(records.record(q)));
  const hsize_t entries = static_cast<hsize_t>(p + 1);
  Handle space{H5Screate_simple(1, &entries, nullptr), H5Sclose};
  Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  ASSERT_GE(H5Pset_chunk(plist.id, 1, &chunk), 0);
  ASSERT_GE(H5Pset_deflate(plist.id, 1), 0);
  Handle indptr{H5Dcreate2(file.id, "indptr", H5T_STD_I64LE, space.id, H5P_DEFAULT, plist.id, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(indptr.id, 0);
  const hsize_t piece = std::min<hsize_t>(entries, hsize_t{1} << 20);
  std::vector<std::int64_t> values(piece);
  for (hsize_t first = 0; first < entries; first += piece) {
    const hsize_t count = std::min(piece, entries - first);
    for (hsize_t e = 0; e < count; ++e)
      values[e] = std::lower_bound(starts.begin(), starts.end(), static_cast<std::int64_t>(first + e)) - starts.begin();
    Handle file_space{H5Dget_space(indptr.id), H5Sclose};
    ASSERT_GE(H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, &first, nullptr, &count, nullptr), 0);
    Handle memory_space{H5Screate_simple(1, &count, nullptr), H5Sclose};
    ASSERT_GE(H5Dwrite(indptr.id, H5T_NATIVE_INT64, memory_space.id, file_space.id, H5P_DEFAULT, values.data()), 0);
  }
  std::vector<std::int64_t> indices;
  std::vector<std::uint32_t> data;
  for (std::int64_t q = 0; q < k; ++q) {
    indices.push_back(record_col(records.record(q)));
    data.insert(data.end(), records.values(q), records.values(q) + mm);
  }
  const auto m = static_cast<hsize_t>(records.shape.m);
  write_dataset(file.id, "indices", H5T_STD_I32LE, H5T_NATIVE_INT64, {static_cast<hsize_t>(k)}, indices.data(), false);
  write_dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT32, {static_cast<hsize_t>(k), m, m}, data.data(), false);
}

InputRecords sorted_records(const InputRecords& in) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(in.size()));
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&in](std::int64_t q) { return std::make_pair(record_row(in.record(q)), record_col(in.record(q))); };
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return key(x) < key(y); });
  InputRecords out;
  out.shape = in.shape;
  for (std::int64_t q : order) out.bytes.insert(out.bytes.end(), in.record(q), in.record(q) + in.stride());
  return out;
}

// Runs argv to its end and returns its exit code and peak RSS in KB (wait4 of that child alone).
std::pair<RunResult, long> run_with_peak_rss(const std::vector<std::string>& argv) {
  ScratchDir capture("blockmm-hdf5-rss");
  const pid_t pid = spawn_process(argv, RunOptions{}, capture / "out", capture / "err");
  int status = 0;
  struct rusage usage {};
  RunResult run;
  if (::wait4(pid, &status, 0, &usage) != pid) return {run, -1};
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.err = std::string(reinterpret_cast<const char*>(read_bytes(capture / "err").data()), read_bytes(capture / "err").size());
  return {run, usage.ru_maxrss};
}

// Issue 17: an HDF5 input with n = 2^26 and a compressed /indptr (p + 1 = 2^26 + 1 entries, a
// few MB on disk) used to be read whole into memory (512 MB, 4096 times the stored size was
// allowed), then multiplied over arrays of all n/m block-rows. /indptr is now read in bounded
// pieces keeping only the rows that hold blocks, and the run relabels: its memory stays near a
// tiny run's, on one rank and two, with the exact product.
TEST_F(Hdf5, HugeNInputWithACompressedIndptrCostsMemoryByItsBlocks) {
  const std::int32_t n = 1 << 26;
  std::mt19937_64 rng(26);
  std::vector<std::int32_t> pool = {0, n - 1};
  std::uniform_int_distribution<std::int32_t> any(1, n - 2);
  while (pool.size() < 24) pool.push_back(any(rng));
  const InputRecords a = sorted_records(blocks_among(n, 1, pool, 200, rng));
  const InputRecords b = blocks_among(n, 1, pool, 200, rng);
  const std::string pa = in_dir + "/a.h5", pb = put("b.bin", b);
  write_compressed_bsr(pa, a, hsize_t{1} << 18);
  struct stat st {};
  ASSERT_EQ(::stat(pa.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 8 << 20) << "the crafted file should be small: its /indptr is compressed";
  const std::vector<std::byte> expected = encode(pair_oracle(a, b));

  const InputRecords tiny = make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}});
  const std::string pt = put("tiny.bin", tiny);
  const auto [tiny_run, tiny_rss] = run_with_peak_rss({blockmm_bin(), "-q", "--threads", "1", pt, pt, out_dir + "/T.bin"});
  ASSERT_EQ(tiny_run.exit_code, 0) << tiny_run.describe();
  std::remove((out_dir + "/T.bin").c_str());

  // ASan keeps up to 256 MB of freed memory (here: libhdf5's decompressed chunks) in its
  // quarantine, resident: a wider margin there, still far below the 3.4 GB of the old reader.
#ifdef BLOCKMM_TEST_ASAN
  constexpr long kMarginKb = 512 * 1024;
#else
  constexpr long kMarginKb = 24 * 1024;
#endif
  const std::string out = out_dir + "/C.bin";
  for (const auto& [x, y] : {std::pair<std::string, std::string>{pa, pb}, {pb, pa}}) {
    const bool a_first = x == pa;
    const auto [run, rss] = run_with_peak_rss({blockmm_bin(), "-q", "--threads", "1", x, y, out});
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_LT(rss, tiny_rss + kMarginKb) << "tiny run: " << tiny_rss << " KB";
    std::cout << "[ info ] n = 2^26 HDF5 input (compressed /indptr): peak RSS " << rss << " KB (tiny run: " << tiny_rss
              << " KB)\n";
    EXPECT_TRUE(read_bytes(out) == (a_first ? expected : encode(pair_oracle(b, a))));
    std::remove(out.c_str());
  }
  const RunResult two = run_mpi(2, {"-q", "--threads", "1", pa, pb, out});
  ASSERT_TRUE(succeeded(two));
  EXPECT_TRUE(read_bytes(out) == expected) << "two ranks differ";
}

// libhdf5 expands a whole chunk to read any part of it: a compressed /indptr in one chunk of
// more than 64 MiB is refused (exit 3, one line) instead of decompressed.
TEST_F(Hdf5, IndptrChunksAboveTheBoundAreRefused) {
  const std::int32_t n = 1 << 23;  // p + 1 entries of 8 bytes: 64 MiB + 8 in one chunk
  const InputRecords a = make_records(n, 1, {{n - 1, 0, {5}}}), b = make_records(n, 1, {{0, n - 1, {7}}});
  const std::string pa = in_dir + "/one_chunk.h5", pb = put("b.bin", b);
  write_compressed_bsr(pa, a, static_cast<hsize_t>(n) + 1);
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", pa, pb, out_dir + "/C.bin"}), 3, "blockmm", pa,
                             "/indptr is stored in chunks of 67108872 bytes; blockmm reads chunks of at most 67108864",
                             out_dir));
  // One entry fewer a chunk: read, and the product is right.
  write_compressed_bsr(pa, a, static_cast<hsize_t>(n));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, out_dir + "/C.bin"})));
  EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == encode(pair_oracle(a, b)));
}

TEST_F(Hdf5, OrderIsCheckedAcrossRankShares) {
  // Two ranks read blocks [0, 3) and [3, 6); blocks 2 and 3 are both in row 3, so only the
  // one-before read of rank 1 sees these defects.
  const InputRecords base = base_matrix();
  const std::string good = put("good.bin", base);
  const std::vector<std::pair<std::vector<std::int64_t>, std::string>> cases = {
      {{0, 3, 0, 0, 2, 3}, "/indices[3] = 0 (block-row 3) repeats /indices[2]: duplicate block (3, 0)"},
      {{0, 3, 1, 0, 2, 3}, "/indices[3] = 0 (block-row 3) is below /indices[2] = 1"}};
  int q = 0;
  for (const auto& [indices, fragment] : cases) {
    Craft craft = craft_from(base);
    craft.indices = indices;
    const std::string path = in_dir + "/boundary" + std::to_string(q++) + ".h5";
    write_craft(path, craft);
    EXPECT_TRUE(failed_cleanly(run_mpi(2, {"-q", path, good, out_dir + "/C.h5"}), 3, "blockmm", path, fragment,
                               out_dir, false));
  }
}

// A user block (H5Pset_userblock: bytes before the HDF5 superblock, for a header of another
// program) shifts every address in the file; the values must still be the matrix's.
TEST_F(Hdf5, UserBlockFilesAreReadCorrectly) {
  std::mt19937_64 rng(77);
  const InputRecords a = testing::random_blocks(spec_of(60, 4, 0.4, 0.1), rng);
  const InputRecords b = testing::random_blocks(spec_of(60, 4, 0.4), rng);
  const std::string pb = put("B.bin", b);
  for (const hsize_t userblock : {512u, 4096u}) {
    SCOPED_TRACE(userblock);
    const std::string path = in_dir + "/A-ub" + std::to_string(userblock) + ".h5";
    Craft craft = craft_from(a);
    craft.userblock = userblock;
    write_craft(path, craft);
    {
      std::vector<std::byte> bytes = read_bytes(path);
      ASSERT_GT(bytes.size(), userblock);
      for (hsize_t q = 0; q < userblock; ++q) bytes[q] = std::byte{0xa5};  // another program's header
      write_bytes(path, bytes);
    }
    ASSERT_TRUE(succeeded(run_blockmm({"-q", path, pb, work + "/C.bin"})));
    OutputRecords product;
    ASSERT_EQ(load(work + "/C.bin", product), "");
    EXPECT_EQ(product.bytes, sparse_oracle(a, b).bytes);
    ASSERT_TRUE(succeeded(run_convert({path, work + "/A.bin"})));
    EXPECT_TRUE(read_bytes(work + "/A.bin") == encode(sorted(a)));
    // Cut short by one byte: the end the superblock records (relative to the user block) is gone.
    std::vector<std::byte> bytes = read_bytes(path);
    bytes.pop_back();
    write_bytes(path, bytes);
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", path, pb, out_dir + "/C.bin"}), 3, "blockmm", path, "truncated",
                               out_dir));
  }
}

}  // namespace
}  // namespace blockmm::e2e
