// Gustavson numeric phase: each output row scatters A(i,k) x B(k,j) into the accumulator of
// tile (i,j), found through a per-thread column -> slot map; the block products run in the
// SIMD block kernels of block_kernels.hpp (one call an A block, over its whole B row). The
// accumulators are the value fields of the tiles' output records themselves, so the phase
// holds no memory beyond the chunk buffers (the backend's workspace keeps them from one call to
// the next: cpu_backend.hpp): tiles are processed in chunks of at most
// --chunk-size (and at most 2 MiB a thread and an eighth of the output, 2 to 32 MiB), and chunk
// c is computed while chunk c-1 is written. Rows longer than a thread's share of a chunk are
// split into column ranges (pieces) that run in parallel. The calling thread writes chunk c-1 at
// the start of chunk c's parallel region and then joins the compute: a writer thread of its own
// would compete with the team's spinning threads for the cores.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/block_kernels.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/numeric_level.hpp"

namespace blockmm::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// The most output bytes a chunk holds here, whatever --chunk-size allows (it is an upper bound):
// 2 MiB a thread, and at most an eighth of the rank's output (a threads'th with more than 8
// threads), between 2 and 32 MiB. Two buffers this size are reused from the third chunk on, so
// their pages are faulted in and cleared once, and the write left after the last chunk's compute
// stays short. Much larger chunks fault and clear every page of the output and leave a long write
// after the compute; a small output still gets several chunks, so that its writes overlap the
// compute too. The per-thread and eighth-of-the-output bounds came out best in a sweep of fixed
// sizes on a many-core node, for one rank and for ranks sharing a node alike.
std::int64_t cpu_chunk_bytes(std::int64_t output_bytes, std::int64_t limit, int threads) {
  const std::int64_t per_thread = std::int64_t{2} << 20;
  const std::int64_t share = output_bytes / std::max(8, threads);
  const std::int64_t bytes =
      std::clamp<std::int64_t>(std::min(share, per_thread * std::max(1, threads)), std::int64_t{2} << 20, std::int64_t{32} << 20);
  return std::min(limit, bytes);
}

// A chunk buffer's room for `bytes`: a chunk near the 2 MiB a thread that cpu_chunk_bytes allows
// (just under it) gets the allocator's 2 MiB, mapped in one huge page rather than 512 fresh 4 KiB
// pages; a small output's chunks keep their size.
std::size_t buffer_bytes(std::int64_t bytes) {
  constexpr auto kMapped = static_cast<std::int64_t>(LargeBufferAllocator<std::byte>::kMapThreshold);
  return static_cast<std::size_t>(bytes >= kMapped / 2 ? std::max(bytes, kMapped) : bytes);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct RowScratch {
  std::vector<std::int32_t> slot;  // block-column -> tile of the current piece (0, 1, ...), or -1
  std::vector<std::uint64_t> a_wide;  // the kernels' widened copy of the current A block
  std::vector<std::uint32_t> padded;  // the piece's accumulators at the kernel's padded stride

  std::uint32_t* padded_tiles() {  // 64-byte aligned: whole registers a tile
    const auto at = reinterpret_cast<std::uintptr_t>(padded.data());
    return padded.data() + ((64 - at % 64) % 64) / 4;
  }
};

// The kernel's padded accumulator stride for this m (0: it accumulates in the records), and
// the most tiles a piece accumulates there: a short row's tiles stay in L1 (64 to 256 bytes a
// tile), a longer piece accumulates in its records.
struct Accumulation {
  std::int64_t padded_stride = 0;
  std::int64_t padded_row_stride = 0;  // lanes from one tile row to the next there
  std::int64_t max_padded_tiles = 0;
  cpu::BlockRowKernel padded_kernel = nullptr;  // an A block at a time, at the padded stride
  cpu::RowKernel row_kernel = nullptr;  // a whole row at once, at the padded stride
};

// Tiles [tile_begin, tile_end) of the pattern, all in local block-row r.
struct RowPiece {
  std::int32_t r;
  std::int64_t tile_begin;
  std::int64_t tile_end;
};

// Copies `tiles` small tiles of m^2 contiguous values (MM, or mm where 0) from the padded
// accumulator into their records (row i, columns `cols`); true if one is all zero. m^2 fixed at
// compile time turns the copy and the test into a few register moves (a call to memcpy a tile
// cost a tenth of el2's numeric phase).
template <int MM>
bool copy_out_tiles(const std::uint32_t* acc, std::int64_t acc_stride, std::byte* out, std::int64_t stride,
                    std::int32_t i, const std::int32_t* cols, std::int64_t tiles, std::int64_t mm_runtime) {
  const std::int64_t mm = MM > 0 ? MM : mm_runtime;
  bool lost = false;
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::uint32_t* c = acc + t * acc_stride;
    set_record_index(out + t * stride, i, cols[t]);
    std::uint32_t any = 0;
    for (std::int64_t q = 0; q < mm; ++q) any |= c[q];
    lost |= any == 0;
    std::memcpy(out + t * stride + 8, c, static_cast<std::size_t>(mm) * 4);
  }
  return lost;
}

bool copy_out_small_tiles(const std::uint32_t* acc, std::int64_t acc_stride, std::byte* out, std::int64_t stride,
                          std::int32_t i, const std::int32_t* cols, std::int64_t tiles, std::int32_t m) {
  switch (m) {
    case 2: return copy_out_tiles<4>(acc, acc_stride, out, stride, i, cols, tiles, 4);
    case 3: return copy_out_tiles<9>(acc, acc_stride, out, stride, i, cols, tiles, 9);
    case 5: return copy_out_tiles<25>(acc, acc_stride, out, stride, i, cols, tiles, 25);
    case 6: return copy_out_tiles<36>(acc, acc_stride, out, stride, i, cols, tiles, 36);
    case 7: return copy_out_tiles<49>(acc, acc_stride, out, stride, i, cols, tiles, 49);
    default: return copy_out_tiles<0>(acc, acc_stride, out, stride, i, cols, tiles, std::int64_t{m} * m);
  }
}

// Computes the piece's tiles into their records at `out` (the record of the piece's first tile).
void multiply_piece(const Operands& ops, const TilePattern& pattern, const RowPiece& piece,
                    cpu::BlockRowKernel kernel, const Accumulation& accumulation, RowScratch& scratch, std::byte* out) {
  const BlockMatrix& a = ops.a;
  const BlockRowsView& b = ops.b;
  const std::int32_t m = a.shape.m;
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t first = piece.tile_begin;
  const std::int64_t tiles = piece.tile_end - first;
  const std::int32_t r = piece.r;
  const std::int32_t i = pattern.row_begin + r;
  const std::int64_t stride = record_bytes<std::uint32_t>(m);

  // The records: headers set, values zeroed; the kernels accumulate into the values in place
  // (4-byte aligned: the buffer is, and a record is 8 + 4 m^2 bytes).
  // Small blocks, and m = 9..64, accumulate at the kernel's padded stride (whole aligned registers
  // a tile or a tile row: the masked stores of neighbouring tiles in record layout held up the next
  // tile's load) and are copied into the records after the piece.
  const bool padded = accumulation.padded_stride > 0 && tiles <= accumulation.max_padded_tiles;
  std::uint32_t* acc = reinterpret_cast<std::uint32_t*>(out + 8);
  std::int64_t acc_stride = stride / 4;
  if (padded) {
    acc_stride = accumulation.padded_stride;
    acc = scratch.padded_tiles();
    std::memset(acc, 0, static_cast<std::size_t>(tiles * acc_stride) * 4);
  } else {
    std::memset(out, 0, static_cast<std::size_t>(tiles * stride));
  }
  // (A padded piece's headers are set as its tiles are copied out: one pass over its records.)
  for (std::int64_t t = 0; t < tiles; ++t) {
    if (!padded) set_record_index(out + t * stride, i, pattern.col[first + t]);
    scratch.slot[pattern.col[first + t]] = static_cast<std::int32_t>(t);
  }
  // A piece narrower than its row reads only the part of each B row inside its columns.
  const bool whole_row = first == pattern.row_ptr[r] && piece.tile_end == pattern.row_ptr[r + 1];
  const std::int32_t j_first = pattern.col[first];
  const std::int32_t j_last = pattern.col[piece.tile_end - 1];

  if (padded && whole_row && accumulation.row_kernel != nullptr) {
    const std::int64_t e0 = a.row_ptr[r];
    accumulation.row_kernel(cpu::RowTask{acc, acc_stride, a.block_values(e0), a.col.data() + e0, a.row_ptr[r + 1] - e0,
                                         b.row_ptr, b.col, b.values, b.row_begin, b.rows_held(), scratch.slot.data()});
  }
  for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1] && !(padded && whole_row && accumulation.row_kernel); ++e) {
    const std::int32_t kr = a.col[e] - b.row_begin;
    if (kr < 0 || kr >= b.rows_held()) continue;
    std::int64_t f0 = b.row_ptr[kr];
    std::int64_t f1 = b.row_ptr[kr + 1];
    if (!whole_row) {
      const std::int32_t* cols = b.col;
      f0 = std::lower_bound(cols + f0, cols + f1, j_first) - cols;
      f1 = std::upper_bound(cols + f0, cols + f1, j_last) - cols;
    }
    if (f0 >= f1) continue;
    const cpu::BlockRowKernel block_kernel = padded ? accumulation.padded_kernel : kernel;
    block_kernel(cpu::BlockRowTask{acc, acc_stride, m, a.block_values(e), b.block_values(f0), b.col + f0, f1 - f0,
                                   scratch.slot.data(), scratch.a_wide.data()});
  }

  bool lost_tile = false;
  if (!padded) {
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::uint32_t* c = acc + t * acc_stride;
      lost_tile |= std::all_of(c, c + mm, [](std::uint32_t v) { return v == 0; });
    }
  } else if (accumulation.padded_row_stride != m) {  // tile rows apart (m >= 9): row by row
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::uint32_t* c = acc + t * acc_stride;
      set_record_index(out + t * stride, i, pattern.col[first + t]);
      for (std::int32_t row = 0; row < m; ++row)
        std::memcpy(out + t * stride + 8 + row * m * 4, c + row * accumulation.padded_row_stride,
                    static_cast<std::size_t>(m) * 4);
      c = reinterpret_cast<const std::uint32_t*>(out + t * stride + 8);
      lost_tile |= std::all_of(c, c + mm, [](std::uint32_t v) { return v == 0; });
    }
  } else {
    lost_tile = copy_out_small_tiles(acc, acc_stride, out, stride, i, pattern.col.data() + first, tiles, m);
  }
  for (std::int64_t t = 0; t < tiles; ++t) scratch.slot[pattern.col[first + t]] = -1;
  if (lost_tile)
    throw Error(ExitCode::other, "internal error: cpu numeric phase produced an all-zero tile the symbolic phase kept");
}

// The pieces of tiles [t0, t1): each row's part of the range, cut every `piece_tiles` tiles.
void split_into_pieces(const TilePattern& pattern, std::int64_t t0, std::int64_t t1, std::int64_t piece_tiles,
                       std::vector<RowPiece>& pieces) {
  pieces.clear();
  const auto& ptr = pattern.row_ptr;
  // The row holding tile t0: the last r with row_ptr[r] <= t0.
  std::int32_t r = static_cast<std::int32_t>(std::upper_bound(ptr.begin(), ptr.end() - 1, t0) - ptr.begin()) - 1;
  for (; r + 1 < static_cast<std::int32_t>(ptr.size()) && ptr[r] < t1; ++r) {
    const std::int64_t lo = std::max(t0, ptr[r]);
    const std::int64_t hi = std::min(t1, ptr[r + 1]);
    for (std::int64_t p = lo; p < hi; p += piece_tiles) pieces.push_back({r, p, std::min(hi, p + piece_tiles)});
  }
}

// The accumulation the kernels of this level offer for m.
Accumulation make_accumulation(cpu::SimdLevel level, std::int32_t m) {
  Accumulation accumulation;
  accumulation.padded_stride = cpu::padded_accumulator_stride(level, m);
  accumulation.padded_row_stride = cpu::padded_row_stride(level, m);
  accumulation.padded_kernel = cpu::padded_block_row_kernel(level, m);
  accumulation.row_kernel = cpu::row_kernel(level, m);
  if (accumulation.padded_kernel == nullptr) accumulation.padded_stride = 0;
  if (accumulation.padded_stride > 0)
    accumulation.max_padded_tiles = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (accumulation.padded_stride * 4));
  return accumulation;
}

// One thread's scratch each, for p local block-rows' output columns.
std::vector<RowScratch> make_scratch(int threads, std::int32_t p, std::int32_t m, const Accumulation& accumulation) {
  std::vector<RowScratch> scratch(static_cast<std::size_t>(threads));
  for (RowScratch& s : scratch) {
    s.slot.assign(static_cast<std::size_t>(p), -1);
    s.a_wide.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(m));
    if (accumulation.padded_stride > 0)
      s.padded.resize(static_cast<std::size_t>(accumulation.max_padded_tiles * accumulation.padded_stride) + 16);
  }
  return scratch;
}

// The tiles to compute: all of them in order, or the ranges `next_tiles` hands out (rows shared
// with other ranks), each cut into chunks of at most chunk_tiles.
struct ChunkSource {
  const std::function<bool(std::int64_t&, std::int64_t&)>& next_tiles;
  std::int64_t total;
  std::int64_t chunk_tiles;
  std::int64_t left_begin = 0, left_end = 0;  // what is left of the current range
  bool all_handed_out = false;

  bool next(std::int64_t& t0, std::int64_t& t1) {
    while (left_begin >= left_end) {
      if (next_tiles) {
        if (!next_tiles(left_begin, left_end)) return false;
        if (left_begin < 0 || left_end > total)
          throw Error(ExitCode::other, "internal error: tiles [" + std::to_string(left_begin) + ", " +
                                           std::to_string(left_end) + ") handed out of " + std::to_string(total));
      } else {
        if (all_handed_out) return false;
        all_handed_out = true;
        left_begin = 0;
        left_end = total;
      }
    }
    t0 = left_begin;
    t1 = std::min(left_end, t0 + chunk_tiles);
    left_begin = t1;
    return true;
  }
};

}  // namespace

NumericReport cpu_numeric_at_level(cpu::SimdLevel level, const Operands& ops, const TilePattern& pattern,
                                   RecordSink& sink, const NumericOptions& options, CpuNumericWorkspace* workspace) {
  const std::int32_t p = ops.a.shape.block_rows();
  const std::int32_t m = ops.a.shape.m;
  const std::int64_t stride = record_bytes<std::uint32_t>(m);
  const int threads = omp_get_max_threads();
  const std::int64_t chunk_tiles =
      std::max<std::int64_t>(1, cpu_chunk_bytes(pattern.tiles() * stride, options.chunk_bytes, threads) / stride);
  // A row with more tiles than a thread's share of the chunk is split between threads.
  const std::int64_t piece_tiles = std::max<std::int64_t>(1, chunk_tiles / threads);
  const cpu::BlockRowKernel kernel = cpu::block_row_kernel(level, m);
  const Accumulation accumulation = make_accumulation(level, m);

  NumericReport report;
  report.device = "host (" + std::to_string(threads) + " OpenMP threads, " + cpu::to_string(level) + " kernels)";
  CpuNumericWorkspace own_workspace;
  LargeVector<std::byte>* const buffers = (workspace != nullptr ? workspace : &own_workspace)->chunk_buffers;
  // The previous chunk, written by the calling thread while the team computes the next one.
  struct PendingWrite {
    std::int64_t first_tile = 0, tiles = 0;
    const std::byte* records = nullptr;
  };
  PendingWrite pending;
  std::exception_ptr write_failure;
  const auto write_pending = [&] {
    if (pending.records == nullptr) return;
    const auto start = Clock::now();
    try {
      sink.write(pending.first_tile, pending.tiles, pending.records);
    } catch (...) {
      write_failure = std::current_exception();
    }
    pending.records = nullptr;
    report.sink_seconds += seconds_since(start);
  };
  // Per thread, the span of its pieces in the current chunk (the writer's counted from the end
  // of its write): the longest is the chunk's compute time.
  std::vector<double> busy(static_cast<std::size_t>(threads));
  std::vector<RowScratch> scratch = make_scratch(threads, p, m, accumulation);
  std::vector<RowPiece> pieces;
  ChunkSource chunks{options.next_tiles, pattern.tiles(), chunk_tiles};
  std::int64_t done = 0;

  for (std::int64_t t0 = 0, t1 = 0; chunks.next(t0, t1);) {
    const std::int64_t count = t1 - t0;
    split_into_pieces(pattern, t0, t1, piece_tiles, pieces);

    // Chunk c fills one buffer while the calling thread writes chunk c-1 from the other (emptied
    // first: a kept buffer that must grow then copies nothing into its new memory).
    LargeVector<std::byte>& buffer = buffers[report.chunks % 2];
    buffer.clear();
    buffer.reserve(buffer_bytes(count * stride));
    buffer.resize(static_cast<std::size_t>(count * stride));

    std::exception_ptr failure;
    const std::int64_t piece_count = static_cast<std::int64_t>(pieces.size());
    const std::int64_t grain = std::max<std::int64_t>(1, piece_count / (std::int64_t{threads} * 32));
    // The display's counter, shared by the threads, is added to some 64 times a thread a chunk:
    // an add a piece (a short row) bounced its cache line between the cores at every row.
    const std::int64_t report_every = std::max<std::int64_t>(1, count / (std::int64_t{threads} * 64));
    std::fill(busy.begin(), busy.end(), 0.0);
#pragma omp parallel if (count >= 256 && piece_count > 1)
    {
#pragma omp master
      write_pending();
      const int me = omp_get_thread_num();
      RowScratch& mine = scratch[static_cast<std::size_t>(me)];
      const auto start = Clock::now();
      std::int64_t unreported = 0;  // tiles done here and not yet added to options.tiles_computed
// Pieces handed out a few at a time: a piece is a row or a large part of one, and a small chunk
// has few; short rows (finite elements: thousands of pieces a chunk) a 32nd of a thread's share
// at a time, since one hand-out a row bounced the loop's counter between the cores (el2 on two
// threads spent a third more CPU than on one).
#pragma omp for schedule(dynamic, grain) nowait
      for (std::int64_t q = 0; q < piece_count; ++q) {
        try {
          const RowPiece& piece = pieces[static_cast<std::size_t>(q)];
          multiply_piece(ops, pattern, piece, kernel, accumulation, mine, buffer.data() + (piece.tile_begin - t0) * stride);
          unreported += piece.tile_end - piece.tile_begin;
          if (options.tiles_computed != nullptr && unreported >= report_every) {
            options.tiles_computed->fetch_add(unreported, std::memory_order_relaxed);
            unreported = 0;
          }
        } catch (...) {
#pragma omp critical
          failure = std::current_exception();
        }
      }
      if (options.tiles_computed != nullptr && unreported > 0)
        options.tiles_computed->fetch_add(unreported, std::memory_order_relaxed);
      busy[static_cast<std::size_t>(me)] = seconds_since(start);
    }
    report.compute_seconds += *std::max_element(busy.begin(), busy.end());
    if (write_failure) std::rethrow_exception(write_failure);
    if (failure) std::rethrow_exception(failure);
    pending = {t0, count, buffer.data()};
    ++report.chunks;
    done += count;
    if (options.progress) options.progress(done);
  }
  write_pending();
  if (write_failure) std::rethrow_exception(write_failure);
  return report;
}

NumericReport cpu_numeric(const Operands& ops, const TilePattern& pattern, RecordSink& sink,
                          const NumericOptions& options, CpuNumericWorkspace* workspace) {
  return cpu_numeric_at_level(cpu::best_simd_level(), ops, pattern, sink, options, workspace);
}

}  // namespace blockmm::kernels
