// Device kernels of the build (records -> CSR / CSC, masks, duplicates, all-zero blocks
// dropped). The host-side sequencing (sorts, scans) is in device_build.cu; these kernels only do
// per-element work. Included by device_build.cu alone (its kernels are defined here).
//
// Records are COL380 input records (int32 i, int32 j, uint16 values): for odd m their stride is
// not a multiple of 4, so indices are read as two uint16 halves.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/build_common.cuh"

namespace blockmm::kernels::cuda {

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
// together by shuffles. A thread a block copying 2 bytes at a time from records tens of bytes
// apart leaves most of each memory transaction unused.
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

}  // namespace blockmm::kernels::cuda
