// Gustavson numeric phase: each output row scatters A(i,k) x B(k,j) into the accumulator
// slot of tile (i,j), found through a per-thread column -> slot map. Rows are processed in
// chunks of bounded output size; chunk c is computed while chunk c-1 is written.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/block_mac.hpp"
#include "kernels/cpu/cpu_backend.hpp"

namespace blockmm::kernels {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct RowScratch {
  std::vector<std::int32_t> slot;  // block-column -> accumulator slot of the current row, or -1
  std::vector<std::uint32_t> acc;
};

// Computes the tiles of panel row r into their records at `out` (the record of the row's
// first tile). M is the block size, or 0 for a size known only at run time. Always inlined
// into the per-ISA clones below, so that each clone vectorises it for its own instruction set.
template <int M>
__attribute__((always_inline)) inline void multiply_row(const Operands& ops, const TilePattern& pattern, std::int32_t r, RowScratch& scratch,
                  std::byte* out) {
  const BlockMatrix& a = ops.a;
  const BlockMatrix& b = ops.b;
  const std::int32_t m = M > 0 ? M : a.shape.m;
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t first = pattern.row_ptr[r];
  const std::int64_t tiles = pattern.row_ptr[r + 1] - first;
  if (tiles == 0) return;

  if (static_cast<std::int64_t>(scratch.acc.size()) < tiles * mm) scratch.acc.resize(tiles * mm);
  std::uint32_t* acc = scratch.acc.data();
  std::fill(acc, acc + tiles * mm, 0u);
  for (std::int64_t t = 0; t < tiles; ++t) scratch.slot[pattern.col[first + t]] = static_cast<std::int32_t>(t);

  for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
    const std::int32_t kr = a.col[e] - b.row_begin;
    if (kr < 0 || kr >= b.rows_held()) continue;
    const std::uint16_t* av = a.block_values(e);
    for (std::int64_t f = b.row_ptr[kr]; f < b.row_ptr[kr + 1]; ++f) {
      const std::int32_t s = scratch.slot[b.col[f]];
      if (s < 0) continue;  // every product of this pair is zero (masks disjoint)
      if constexpr (M > 0)
        cpu::block_mac_fixed<M>(acc + s * mm, av, b.block_values(f));
      else
        cpu::block_mac_any(acc + s * mm, av, b.block_values(f), m);
    }
  }

  const std::int64_t stride = record_bytes<std::uint32_t>(m);
  const std::int32_t i = pattern.row_begin + r;
  bool lost_tile = false;
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int32_t j = pattern.col[first + t];
    std::byte* rec = out + t * stride;
    set_record_index(rec, i, j);
    const std::uint32_t* c = acc + t * mm;
    std::memcpy(rec + 8, c, static_cast<std::size_t>(mm) * 4);
    lost_tile |= std::all_of(c, c + mm, [](std::uint32_t v) { return v == 0; });
    scratch.slot[j] = -1;
  }
  if (lost_tile)
    throw Error(ExitCode::other, "internal error: cpu numeric phase produced an all-zero tile the symbolic phase kept");
}

// The saturating multiply-adds vectorise far better with AVX2 (pmulld, unsigned min/max) than
// with x86-64's SSE2 baseline; target_clones picks the best at load time on any x86-64 CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define BLOCKMM_ISA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BLOCKMM_ISA_CLONES
#endif

#define BLOCKMM_ROW_FUNCTION(NAME, M)                                                                   \
  BLOCKMM_ISA_CLONES void NAME(const Operands& ops, const TilePattern& pattern, std::int32_t r, RowScratch& s, \
                               std::byte* out) {                                                        \
    multiply_row<M>(ops, pattern, r, s, out);                                                           \
  }
BLOCKMM_ROW_FUNCTION(multiply_row_m1, 1)
BLOCKMM_ROW_FUNCTION(multiply_row_m2, 2)
BLOCKMM_ROW_FUNCTION(multiply_row_m4, 4)
BLOCKMM_ROW_FUNCTION(multiply_row_m8, 8)
BLOCKMM_ROW_FUNCTION(multiply_row_m16, 16)
BLOCKMM_ROW_FUNCTION(multiply_row_m32, 32)
BLOCKMM_ROW_FUNCTION(multiply_row_any, 0)
#undef BLOCKMM_ROW_FUNCTION

using RowFunction = void (*)(const Operands&, const TilePattern&, std::int32_t, RowScratch&, std::byte*);

RowFunction row_function(std::int32_t m) {
  switch (m) {
    case 1: return multiply_row_m1;
    case 2: return multiply_row_m2;
    case 4: return multiply_row_m4;
    case 8: return multiply_row_m8;
    case 16: return multiply_row_m16;
    case 32: return multiply_row_m32;
    default: return multiply_row_any;
  }
}

}  // namespace

NumericReport cpu_numeric(const Operands& ops, const TilePattern& pattern, RecordSink& sink,
                          const NumericOptions& options) {
  const std::int32_t p = ops.a.shape.block_rows();
  const std::int32_t rows = ops.a.rows_held();
  const std::int64_t stride = record_bytes<std::uint32_t>(ops.a.shape.m);
  const std::int64_t chunk_tiles = std::max<std::int64_t>(1, options.chunk_bytes / stride);
  const RowFunction multiply = row_function(ops.a.shape.m);

  NumericReport report;
  report.device = "host (" + std::to_string(omp_get_max_threads()) + " OpenMP threads)";
  LargeVector<std::byte> buffers[2];
  std::future<double> pending_write;  // the previous chunk's write, running beside compute
  const int threads = omp_get_max_threads();
  std::vector<RowScratch> scratch(static_cast<std::size_t>(threads));
  for (RowScratch& s : scratch) s.slot.assign(static_cast<std::size_t>(p), -1);

  std::int32_t r0 = 0;
  while (r0 < rows) {
    // The next chunk: whole rows, at most chunk_tiles tiles unless one row alone is larger.
    std::int32_t r1 = r0 + 1;
    while (r1 < rows && pattern.row_ptr[r1 + 1] - pattern.row_ptr[r0] <= chunk_tiles) ++r1;
    const std::int64_t t0 = pattern.row_ptr[r0];
    const std::int64_t count = pattern.row_ptr[r1] - t0;

    // Chunk c fills one buffer while chunk c-1's write (waited for below) drains the other.
    LargeVector<std::byte>& buffer = buffers[report.chunks % 2];
    buffer.resize(static_cast<std::size_t>(count * stride));

    const auto start = Clock::now();
    std::exception_ptr failure;
#pragma omp parallel if (count >= 256)
    {
      RowScratch& mine = scratch[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 4)
      for (std::int32_t r = r0; r < r1; ++r) {
        try {
          multiply(ops, pattern, r, mine, buffer.data() + (pattern.row_ptr[r] - t0) * stride);
          if (options.tiles_computed != nullptr)
            options.tiles_computed->fetch_add(pattern.row_ptr[r + 1] - pattern.row_ptr[r], std::memory_order_relaxed);
        } catch (...) {
#pragma omp critical
          failure = std::current_exception();
        }
      }
    }
    report.compute_seconds += seconds_since(start);
    if (failure) {
      if (pending_write.valid()) pending_write.wait();
      std::rethrow_exception(failure);
    }

    if (pending_write.valid()) report.sink_seconds += pending_write.get();
    if (count > 0) {
      pending_write = std::async(std::launch::async, [&sink, &buffer, t0, count] {
        const auto write_start = Clock::now();
        sink.write(t0, count, buffer.data());
        return seconds_since(write_start);
      });
    }
    ++report.chunks;
    if (options.progress) options.progress(pattern.row_ptr[r1]);
    r0 = r1;
  }
  if (pending_write.valid()) report.sink_seconds += pending_write.get();
  return report;
}

}  // namespace blockmm::kernels
