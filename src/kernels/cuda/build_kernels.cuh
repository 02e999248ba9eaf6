// Device kernels of the build (records -> CSR / CSC, masks, duplicates, all-zero blocks
// dropped) and of the exact symbolic phase. The host-side sequencing (sorts, scans, batches
// under the memory budget) is in device_build.cu; these kernels only do per-element work.
//
// Records are COL380 input records (int32 i, int32 j, uint16 values): for odd m their stride is
// not a multiple of 4, so indices are read as two uint16 halves.
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cstddef>
#include <cstdint>

namespace blockmm::kernels::cuda {

using u64 = unsigned long long;

__device__ __forceinline__ std::int32_t record_index_at(const std::uint16_t* h) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(h[0]) | (static_cast<std::uint32_t>(h[1]) << 16));
}

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Sort key (row - row_begin, column) and all-zero flag of every record. A record outside the
// operand's rows sets *misplaced to its index + 1 (the partition sent it to the wrong rank).
__global__ void record_keys(const std::byte* records, std::int64_t stride, std::int64_t count, std::int32_t m,
                            std::int32_t row_begin, std::int32_t row_end, int col_bits, u64* keys,
                            std::int32_t* index, std::uint8_t* zero, u64* misplaced) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t q = global_thread(); q < count; q += grid_threads()) {
    const auto* h = reinterpret_cast<const std::uint16_t*>(records + q * stride);
    const std::int32_t i = record_index_at(h);
    const std::int32_t j = record_index_at(h + 2);
    if (i < row_begin || i >= row_end) atomicMax(misplaced, static_cast<u64>(q) + 1);
    keys[q] = (static_cast<u64>(static_cast<std::uint32_t>(i - row_begin)) << col_bits) | static_cast<std::uint32_t>(j);
    index[q] = static_cast<std::int32_t>(q);
    const std::uint16_t* v = h + 4;
    bool all_zero = true;
    for (std::int64_t e = 0; e < mm && all_zero; ++e) all_zero = v[e] == 0;
    zero[q] = all_zero ? 1 : 0;
  }
}

// *last = 1 + the largest sorted position whose key repeats the one before it (0: none). The
// host build reports the same one: the last duplicate in (row, column) order.
__global__ void find_duplicates(const u64* keys, std::int64_t count, u64* last) {
  for (std::int64_t s = global_thread() + 1; s < count; s += grid_threads())
    if (keys[s] == keys[s - 1]) atomicMax(last, static_cast<u64>(s) + 1);
}

__global__ void mark_kept(const std::int32_t* sorted_index, const std::uint8_t* zero, std::int64_t count,
                          std::int32_t* kept) {
  for (std::int64_t s = global_thread(); s < count; s += grid_threads()) kept[s] = zero[sorted_index[s]] ? 0 : 1;
}

// Kept block b = position[s]: its source record, column and row (relative).
__global__ void place_blocks(const u64* sorted_keys, const std::int32_t* sorted_index, const std::int32_t* kept,
                             const std::int32_t* position, std::int64_t count, int col_bits, std::int32_t* block_source,
                             std::int32_t* block_col, std::int32_t* block_row) {
  const u64 col_mask = (u64{1} << col_bits) - 1;
  for (std::int64_t s = global_thread(); s < count; s += grid_threads()) {
    if (!kept[s]) continue;
    const std::int32_t b = position[s];
    block_source[b] = sorted_index[s];
    block_col[b] = static_cast<std::int32_t>(sorted_keys[s] & col_mask);
    block_row[b] = static_cast<std::int32_t>(sorted_keys[s] >> col_bits);
  }
}

// Where each row starts in keys sorted by (row, column), row = key >> col_bits: starts[r] is the
// first s whose row is r or more, mapped through `position` where given (CSR row pointers of the
// kept blocks), and starts[rows] the end. Each entry is written once, by the key where the row
// changes (no counters: atomics on one row's counter serialised a warp whose keys all share that
// row, 11 ms of D4's build).
template <typename Out>
__global__ void row_starts(const u64* sorted_keys, std::int64_t count, int col_bits, std::int64_t rows,
                           const std::int32_t* position, Out* starts) {
  for (std::int64_t s = global_thread(); s <= count; s += grid_threads()) {
    const std::int64_t before = s == 0 ? -1 : static_cast<std::int64_t>(sorted_keys[s - 1] >> col_bits);
    const std::int64_t here = s == count ? rows : static_cast<std::int64_t>(sorted_keys[s] >> col_bits);
    const Out at = static_cast<Out>(position != nullptr ? position[s] : s);
    for (std::int64_t r = before + 1; r <= here; ++r) starts[r] = at;
  }
}

// Values in CSR order and each block's mask: non-zero columns (left operand) or rows (right).
__global__ void gather_values(const std::byte* records, std::int64_t stride, const std::int32_t* block_source,
                              std::int64_t blocks, std::int32_t m, int words, bool left, std::uint16_t* values,
                              u64* masks) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t b = global_thread(); b < blocks; b += grid_threads()) {
    const auto* v = reinterpret_cast<const std::uint16_t*>(records + static_cast<std::int64_t>(block_source[b]) * stride) + 4;
    std::uint16_t* out = values + b * mm;
    u64* mask = masks + b * words;
    for (int w = 0; w < words; ++w) mask[w] = 0;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < m; ++c) {
        const std::uint16_t x = v[r * m + c];
        out[r * m + c] = x;
        if (x != 0) {
          const std::int64_t bit = left ? c : r;
          mask[bit >> 6] |= u64{1} << (bit & 63);
        }
      }
    }
  }
}

// gather_values for blocks of whole 8-byte words (m even, m <= 64): kWords lanes (a power of two
// up to 32) copy a block's kWords words, consecutive lanes consecutive words, and OR their masks
// together by shuffles. A thread a block copied 2 bytes at a time from records 40-136 bytes apart:
// 6-8 ms a D4 or G1 operand.
template <int kWords>
__global__ void gather_value_words(const std::byte* records, std::int64_t stride, const std::int32_t* block_source,
                                   std::int64_t blocks, std::int32_t m, bool left, std::uint16_t* values, u64* masks) {
  static_assert(kWords >= 1 && kWords <= 32 && (kWords & (kWords - 1)) == 0, "a power of two up to a warp");
  const std::int64_t words = blocks * kWords;
  // Whole warps run the loop together (the shuffles need every lane): the bound is rounded up.
  const std::int64_t rounded = (words + 31) / 32 * 32;
  for (std::int64_t t = global_thread(); t < rounded; t += grid_threads()) {
    const bool active = t < words;
    const std::int64_t b = t / kWords;
    const int w = static_cast<int>(t % kWords);
    u64 mask = 0;
    if (active) {
      const std::byte* from = records + static_cast<std::int64_t>(block_source[b]) * stride + 8;
      const u64 x = reinterpret_cast<const u64*>(from)[w];
      reinterpret_cast<u64*>(values + b * kWords * 4)[w] = x;
      for (int part = 0; part < 4; ++part)  // the word's four values
        if ((x >> (16 * part)) & 0xFFFF) {
          const int e = 4 * w + part;
          mask |= u64{1} << (left ? e % m : e / m);
        }
    }
    for (int offset = kWords / 2; offset > 0; offset /= 2) mask |= __shfl_xor_sync(0xFFFFFFFFu, mask, offset, kWords);
    if (active && w == 0) masks[b] = mask;
  }
}

// CSC keys (column, row) of the kept blocks, and the columns' counts.
__global__ void csc_keys(const std::int32_t* block_col, const std::int32_t* block_row, std::int64_t blocks, int row_bits,
                         u64* keys, std::int32_t* entry_block, std::int32_t* col_count) {
  for (std::int64_t b = global_thread(); b < blocks; b += grid_threads()) {
    keys[b] = (static_cast<u64>(static_cast<std::uint32_t>(block_col[b])) << row_bits) |
              static_cast<std::uint32_t>(block_row[b]);
    entry_block[b] = static_cast<std::int32_t>(b);
    atomicAdd(col_count + block_col[b], 1);
  }
}

__global__ void csc_rows(const u64* sorted_keys, std::int64_t blocks, int row_bits, std::int32_t row_begin,
                         std::int32_t* csc_row) {
  const u64 row_mask = (u64{1} << row_bits) - 1;
  for (std::int64_t e = global_thread(); e < blocks; e += grid_threads())
    csc_row[e] = row_begin + static_cast<std::int32_t>(sorted_keys[e] & row_mask);
}

// ---- symbolic phase ---------------------------------------------------------------------

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
