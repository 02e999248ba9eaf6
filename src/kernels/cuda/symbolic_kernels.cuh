// Device kernels of the exact symbolic phase (block products per row, light rows' sorted
// products, heavy rows' bitsets) and of the dense path's column-tile splits. The host-side
// sequencing (batches under the memory budget) is in device_symbolic.cu, which alone includes
// this header (its kernels are defined here).
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/build_common.cuh"

namespace blockmm::kernels::cuda {

// What the symbolic kernels read of both operands.
struct SymbolicOperands {
  const std::int32_t* a_row_ptr;  // relative to the A panel's first row
  const std::int32_t* a_col;
  const u64* a_masks;
  const std::int32_t* b_row_ptr;  // relative to b_row_begin
  const std::int32_t* b_col;
  const u64* b_masks;
  std::int32_t b_row_begin;
  std::int32_t b_rows;
  std::int32_t m;
  int mask_words;
};

__device__ __forceinline__ bool masks_intersect(const u64* x, const u64* y, int words) {
  for (int w = 0; w < words; ++w)
    if (x[w] & y[w]) return true;
  return false;
}

__device__ __forceinline__ bool mask_full(const u64* mask, std::int32_t m) {
  for (int w = 0; w * 64 < m; ++w) {
    const int bits = m - 64 * w < 64 ? m - 64 * w : 64;
    const u64 full = bits == 64 ? ~u64{0} : (u64{1} << bits) - 1;
    if (mask[w] != full) return false;
  }
  return true;
}

// Block products per A block: the length of the B row it meets.
__global__ void products_per_block(SymbolicOperands ops, std::int64_t a_blocks, std::int64_t* products) {
  for (std::int64_t e = global_thread(); e < a_blocks; e += grid_threads()) {
    const std::int32_t kr = ops.a_col[e] - ops.b_row_begin;
    products[e] = kr >= 0 && kr < ops.b_rows ? ops.b_row_ptr[kr + 1] - ops.b_row_ptr[kr] : 0;
  }
}

// Bitset of the columns of every B row (all stored blocks are non-zero): one thread block a row.
__global__ void b_row_columns(SymbolicOperands ops, std::int64_t words, u64* bits) {
  for (std::int32_t r = blockIdx.x; r < ops.b_rows; r += gridDim.x)
    for (std::int32_t f = ops.b_row_ptr[r] + threadIdx.x; f < ops.b_row_ptr[r + 1]; f += blockDim.x) {
      const std::int32_t j = ops.b_col[f];
      atomicOr(bits + r * words + (j >> 6), u64{1} << (j & 63));
    }
}

// One warp ORs into a row's bitset `bits` the columns of the tiles A block e reaches: its B row's
// column bitset whole when the A block's mask is full (it meets every block there), else each
// B block whose mask meets it, as the cpu backend tests them. Atomic: other warps OR beside it.
__device__ __forceinline__ void or_block_columns(const SymbolicOperands& ops, std::int32_t e, std::int64_t words,
                                                 const u64* b_columns, int lane, u64* bits) {
  const std::int32_t kr = ops.a_col[e] - ops.b_row_begin;
  if (kr < 0 || kr >= ops.b_rows) return;
  const u64* amask = ops.a_masks + static_cast<std::int64_t>(e) * ops.mask_words;
  if (b_columns != nullptr && mask_full(amask, ops.m)) {
    const u64* row_bits = b_columns + static_cast<std::int64_t>(kr) * words;
    for (std::int64_t w = lane; w < words; w += 32) {
      const u64 x = row_bits[w];
      if (x != 0) atomicOr(bits + w, x);
    }
  } else {
    for (std::int32_t f = ops.b_row_ptr[kr] + lane; f < ops.b_row_ptr[kr + 1]; f += 32)
      if (masks_intersect(amask, ops.b_masks + static_cast<std::int64_t>(f) * ops.mask_words, ops.mask_words)) {
        const std::int32_t j = ops.b_col[f];
        atomicOr(bits + (j >> 6), u64{1} << (j & 63));
      }
  }
}

// Heavy rows: the bitset of each row's non-empty tiles, in shared memory when it fits
// (dynamic shared size words * 8) else straight in `out`, and its population count. Each warp
// takes its own A blocks (or_block_columns; no barrier between them), and the row stops once
// every one of its `columns` bits is set: a full row stays full, and dense rows fill after a few
// dozen A blocks.
template <int kThreads>
__global__ void heavy_row_bitsets(SymbolicOperands ops, const std::int32_t* rows, std::int64_t words,
                                  std::int32_t columns, const u64* b_columns, bool shared_bits, u64* out,
                                  std::int64_t* counts) {
  static_assert(kThreads % 32 == 0, "whole warps");
  constexpr int kWarps = kThreads / 32;
  constexpr int kRound = kWarps * 8;  // A blocks between two checks for a full row
  extern __shared__ u64 shared[];
  using Reduce = cub::BlockReduce<std::int64_t, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  const std::int32_t r = rows[blockIdx.x];
  u64* global_bits = out + static_cast<std::int64_t>(blockIdx.x) * words;
  u64* bits = shared_bits ? shared : global_bits;
  for (std::int64_t w = threadIdx.x; w < words; w += kThreads) bits[w] = 0;
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const u64 last_word = columns % 64 == 0 ? ~u64{0} : (u64{1} << (columns % 64)) - 1;
  const std::int32_t end = ops.a_row_ptr[r + 1];
  for (std::int32_t e0 = ops.a_row_ptr[r]; e0 < end; e0 += kRound) {
    const std::int32_t e1 = e0 + kRound < end ? e0 + kRound : end;
    for (std::int32_t e = e0 + warp; e < e1; e += kWarps) or_block_columns(ops, e, words, b_columns, lane, bits);
    __syncthreads();
    int full = 1;
    for (std::int64_t w = threadIdx.x; w < words && full; w += kThreads)
      full = bits[w] == (w == words - 1 ? last_word : ~u64{0});
    if (__syncthreads_and(full)) break;
  }
  std::int64_t count = 0;
  for (std::int64_t w = threadIdx.x; w < words; w += kThreads) {
    count += __popcll(bits[w]);
    if (shared_bits) global_bits[w] = bits[w];
  }
  const std::int64_t total = Reduce(reduce_storage).Sum(count);
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

// Long heavy rows (a power-law A has rows of 10^5-10^6 blocks): one thread block walking such a
// row alone serialises the phase on it, so the row's blocks are cut into segments, a thread
// block each, every warp taking its own A blocks and ORing bits atomically into the row's
// global bitset (slot `slot` of `out`, zeroed before). Counts come after, from bitset_counts.
struct HeavySegment {
  std::int32_t slot;   // the row's bitset in the batch
  std::int32_t row;    // panel row
  std::int32_t begin;  // its A blocks [begin, end)
  std::int32_t end;
};

__global__ void heavy_row_segments(SymbolicOperands ops, const HeavySegment* segments, std::int64_t words,
                                   const u64* b_columns, u64* out) {
  const HeavySegment segment = segments[blockIdx.x];
  u64* bits = out + static_cast<std::int64_t>(segment.slot) * words;
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  for (std::int32_t e = segment.begin + static_cast<std::int32_t>(threadIdx.x / 32); e < segment.end; e += warps)
    or_block_columns(ops, e, words, b_columns, lane, bits);
}

// Population count of each of the first gridDim.x bitsets of `bits`.
template <int kThreads>
__global__ void bitset_counts(const u64* bits, std::int64_t words, std::int64_t* counts) {
  using Reduce = cub::BlockReduce<std::int64_t, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  const u64* row_bits = bits + static_cast<std::int64_t>(blockIdx.x) * words;
  std::int64_t count = 0;
  for (std::int64_t w = threadIdx.x; w < words; w += kThreads) count += __popcll(row_bits[w]);
  const std::int64_t total = Reduce(reduce_storage).Sum(count);
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

// Columns of each bitset row, ascending, written from offset[row] on.
template <int kThreads>
__global__ void bitset_columns(const u64* bits, std::int64_t words, const std::int64_t* offset, std::int32_t* cols) {
  using Scan = cub::BlockScan<std::int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const u64* row_bits = bits + static_cast<std::int64_t>(blockIdx.x) * words;
  const std::int64_t per_thread = (words + kThreads - 1) / kThreads;
  const std::int64_t w0 = threadIdx.x * per_thread;
  const std::int64_t w1 = w0 + per_thread < words ? w0 + per_thread : words;
  std::int64_t count = 0;
  for (std::int64_t w = w0; w < w1; ++w) count += __popcll(row_bits[w]);
  std::int64_t before = 0;
  Scan(scan_storage).ExclusiveSum(count, before);
  std::int32_t* out = cols + offset[blockIdx.x] + before;
  for (std::int64_t w = w0; w < w1; ++w)
    for (u64 x = row_bits[w]; x != 0; x &= x - 1) *out++ = static_cast<std::int32_t>(w * 64 + __ffsll(static_cast<long long>(x)) - 1);
}

// Light rows: every block pair of the row as a key (row's index in the batch, column), or the
// sentinel where the masks show a zero product; sorting and de-duplicating the keys gives the
// row's tiles. One warp a row; the batch's row i writes from `first[i] - first_base` on (first:
// the products of the light rows before it, so that a batch takes its part of one array).
__global__ void expand_light_rows(SymbolicOperands ops, const std::int32_t* rows, std::int32_t batch_rows,
                                  const std::int64_t* first, std::int64_t first_base, int col_bits, u64 sentinel,
                                  u64* keys) {
  const std::int64_t warp = global_thread() / 32;
  const int lane = threadIdx.x % 32;
  for (std::int64_t i = warp; i < batch_rows; i += grid_threads() / 32) {
    const std::int32_t r = rows[i];
    std::int64_t at = first[i] - first_base;
    for (std::int32_t e = ops.a_row_ptr[r]; e < ops.a_row_ptr[r + 1]; ++e) {
      const std::int32_t kr = ops.a_col[e] - ops.b_row_begin;
      if (kr < 0 || kr >= ops.b_rows) continue;
      const u64* amask = ops.a_masks + static_cast<std::int64_t>(e) * ops.mask_words;
      const std::int32_t f0 = ops.b_row_ptr[kr];
      const std::int32_t f1 = ops.b_row_ptr[kr + 1];
      for (std::int32_t f = f0 + lane; f < f1; f += 32) {
        const bool meets = masks_intersect(amask, ops.b_masks + static_cast<std::int64_t>(f) * ops.mask_words, ops.mask_words);
        keys[at + (f - f0)] = meets ? (static_cast<u64>(i) << col_bits) | static_cast<std::uint32_t>(ops.b_col[f]) : sentinel;
      }
      at += f1 - f0;
    }
  }
}

// Unique keys of a light batch (sentinel excluded): their columns, in row order, at cols.
__global__ void light_columns(const u64* unique_keys, std::int64_t count, int col_bits, std::int32_t* cols) {
  const u64 col_mask = (u64{1} << col_bits) - 1;
  for (std::int64_t u = global_thread(); u < count; u += grid_threads())
    cols[u] = static_cast<std::int32_t>(unique_keys[u] & col_mask);
}

// Each light row's tile count, from where the batch's rows start in its unique keys (row_starts).
__global__ void light_row_tiles(const std::int64_t* starts, std::int32_t batch_rows, const std::int32_t* rows,
                                std::int64_t* row_tiles) {
  for (std::int64_t i = global_thread(); i < batch_rows; i += grid_threads()) row_tiles[rows[i]] = starts[i + 1] - starts[i];
}

// Copies the columns of one class's rows (rows[i], whose columns start at from + source[i]) to
// their place in the pattern. One warp a row.
__global__ void place_rows(const std::int64_t* row_ptr, const std::int32_t* rows, std::int64_t count,
                           const std::int64_t* source, const std::int32_t* from, std::int32_t* cols) {
  const std::int64_t warp = global_thread() / 32;
  const int lane = threadIdx.x % 32;
  for (std::int64_t i = warp; i < count; i += grid_threads() / 32) {
    const std::int32_t r = rows[i];
    const std::int32_t* row_from = from + source[i];
    for (std::int64_t t = row_ptr[r] + lane; t < row_ptr[r + 1]; t += 32) cols[t] = row_from[t - row_ptr[r]];
  }
}

// out[i] = per_row[rows[i]]: a per-row array read for one class of rows.
__global__ void gather_rows(const std::int64_t* per_row, const std::int32_t* rows, std::int64_t count,
                            std::int64_t* out) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) out[i] = per_row[rows[i]];
}

// per_row[rows[i]] = values[i]: the reverse, for the heavy rows' tile counts.
__global__ void scatter_rows(const std::int64_t* values, const std::int32_t* rows, std::int64_t count,
                             std::int64_t* per_row) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) per_row[rows[i]] = values[i];
}

// Per row, where column tile jt of width `tile_cols` block-columns starts in the row's tiles:
// split[r * (col_tiles + 1) + jt], absolute tile indices (the dense path's work units).
__global__ void column_tile_splits(const std::int64_t* row_ptr, const std::int32_t* cols, std::int32_t rows,
                                   std::int32_t col_tiles, std::int32_t tile_cols, std::int64_t* split) {
  const std::int64_t items = static_cast<std::int64_t>(rows) * (col_tiles + 1);
  for (std::int64_t x = global_thread(); x < items; x += grid_threads()) {
    const std::int64_t r = x / (col_tiles + 1);
    const std::int64_t jt = x % (col_tiles + 1);
    const std::int64_t j0 = jt * tile_cols;
    std::int64_t lo = row_ptr[r], hi = row_ptr[r + 1];
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (cols[mid] < j0) lo = mid + 1;
      else hi = mid;
    }
    split[x] = lo;
  }
}

}  // namespace blockmm::kernels::cuda
