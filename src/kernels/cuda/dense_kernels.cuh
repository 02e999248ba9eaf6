// Kernels of the dense-tile path: scatter block panels into dense tiles for cuBLAS, and gather
// the product back into output records. Two exact encodings:
//
// - int8 byte planes (n up to kInt8MaxOrder): every uint16 value u is split into its bytes,
//   each stored offset by -128 as int8 (hi = (u >> 8) - 128, lo = (u & 255) - 128), so that one
//   int8 GEMM with int32 accumulation (tensor cores) multiplies the stacked planes [A_hi; A_lo]
//   by [B_hi, B_lo] and yields all four byte products. For bytes x = X' + 128, y = Y' + 128,
//   sum_k x y = sum_k X'Y' + 128 (sum_k X' + sum_k Y') + 16384 n, where sum_k X'Y' is the GEMM
//   (|X'Y'| <= 2^14, so sums of up to 131071 terms fit int32) and the plane sums come from
//   vector_sums. Then A B = 2^16 hh + 2^8 (hl + lh) + ll, below 2^47 for n < 2^17: int64 exact.
// - float64 (n < 2^21): each product of two uint16 is below 2^32 and every sum of at most n of
//   them is below 2^53.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels::cuda {

// The last index r in [lo, hi) with ptr[r] <= x: the row (or column) that holds entry x of a
// compressed index whose entries [ptr[lo], ptr[hi]) include x. Empty rows share a ptr value;
// "last" skips past them.
__device__ __forceinline__ std::int32_t owner_of_entry(const std::int32_t* ptr, std::int32_t lo, std::int32_t hi,
                                                        std::int64_t x) {
  while (hi - lo > 1) {
    const std::int32_t mid = (lo + hi) / 2;
    if (ptr[mid] <= x) lo = mid; else hi = mid;
  }
  return lo;
}

// Where a value of the dense A tile (row r, column c) or B tile (row r, column c) goes.
// float64, column-major with leading dimension `ld`.
struct Float64Tile {
  double* dense;
  std::int64_t ld;
  __device__ void store(std::int64_t r, std::int64_t c, std::uint16_t u) const { dense[r + c * ld] = u; }
};
// int8 byte planes: each vector (a row of the A tile, a column of the B tile) holds k_pitch
// contiguous entries, the padded n; hi planes' vectors first, lo planes' from `lo_vector`. A's
// vectors are its rows (a K x M column-major operand for a transposed GEMM), B's its columns.
template <bool kVectorsAreColumns>
struct Int8Planes {
  std::int8_t* planes;
  std::int64_t k_pitch, lo_vector;
  __device__ void store(std::int64_t r, std::int64_t c, std::uint16_t u) const {
    const std::int64_t vector = kVectorsAreColumns ? c : r;
    const std::int64_t k = kVectorsAreColumns ? r : c;
    planes[vector * k_pitch + k] = static_cast<std::int8_t>(static_cast<int>(u >> 8) - 128);
    planes[(lo_vector + vector) * k_pitch + k] = static_cast<std::int8_t>(static_cast<int>(u & 255) - 128);
  }
};
using Int8PlanesA = Int8Planes<false>;
using Int8PlanesB = Int8Planes<true>;

// sums[v] = the sum of plane vector v's entries; one thread block a vector.
__global__ void vector_sums(const std::int8_t* planes, std::int64_t k_pitch, std::int32_t* sums) {
  __shared__ std::int32_t partial[256];
  const std::int8_t* vector = planes + blockIdx.x * k_pitch;
  std::int32_t sum = 0;
  for (std::int64_t k = threadIdx.x; k < k_pitch; k += blockDim.x) sum += vector[k];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// Dense A tile [rows x n]: A's blocks of panel rows [row0, row0 + rows / m).
// Blocks of those rows are contiguous in CSR order: [first_block, first_block + blocks).
template <typename Tile>
__global__ void scatter_a_tile(const std::int32_t* a_row_ptr, const std::int32_t* a_col, const std::uint16_t* a_values,
                               std::int32_t m, std::int32_t row0, std::int32_t tile_rows, std::int32_t first_block,
                               std::int64_t values, Tile tile) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < values;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = first_block + v / mm;
    const int e = static_cast<int>(v % mm);
    const std::int32_t row = owner_of_entry(a_row_ptr, row0, row0 + tile_rows / m, b);
    const std::int64_t r = static_cast<std::int64_t>(row - row0) * m + e / m;
    const std::int64_t c = static_cast<std::int64_t>(a_col[b]) * m + e % m;
    tile.store(r, c, a_values[b * mm + e]);
  }
}

// Dense B tile [n x cols]: B's blocks of block-columns [col0, col0 + cols / m), which are
// contiguous in CSC order: entries [first_entry, first_entry + entries).
template <typename Tile>
__global__ void scatter_b_tile(const std::int32_t* b_col_ptr, const std::int32_t* b_csc_row,
                               const std::int32_t* b_csc_block, const std::uint16_t* b_values, std::int32_t m,
                               std::int32_t col0, std::int32_t tile_cols, std::int32_t first_entry,
                               std::int64_t values, Tile tile) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < values;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t entry = first_entry + v / mm;
    const int e = static_cast<int>(v % mm);
    const std::int32_t col = owner_of_entry(b_col_ptr, col0, col0 + tile_cols / m, entry);
    const std::int64_t r = static_cast<std::int64_t>(b_csc_row[entry]) * m + e / m;
    const std::int64_t c = static_cast<std::int64_t>(col - col0) * m + e % m;
    tile.store(r, c, b_values[static_cast<std::int64_t>(b_csc_block[entry]) * mm + e]);
  }
}

// The saturated value of the dense product tile at (r, c).
struct Float64Product {
  const double* c_tile;  // column-major [ld x cols]
  std::int64_t ld;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const {
    const double x = c_tile[r + c * ld];
    return x >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
  }
};
struct Int8PlanesProduct {
  const std::int32_t* c_tile;  // column-major [ld x 2 col_lo]: quadrants hi-hi, lo-hi (rows from row_lo), hi-lo, lo-lo
  std::int64_t ld, row_lo, col_lo;
  const std::int32_t* a_sums;  // per A plane row (lo rows from row_lo)
  const std::int32_t* b_sums;  // per B plane column (lo columns from col_lo)
  std::int64_t n;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const {
    const auto bytes = [&](std::int64_t ar, std::int64_t bc) {  // sum_k x y of one pair of planes
      return static_cast<std::int64_t>(c_tile[ar + bc * ld]) + 128 * (static_cast<std::int64_t>(a_sums[ar]) + b_sums[bc]) +
             16384 * n;
    };
    const std::int64_t hh = bytes(r, c), hl = bytes(r, col_lo + c), lh = bytes(row_lo + r, c),
                       ll = bytes(row_lo + r, col_lo + c);
    const std::int64_t x = (hh << 16) + ((hl + lh) << 8) + ll;
    return x >= 4294967295 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
  }
};

// Output records of the units' tiles from the dense product tile (element (0, 0) = block
// (row0, col0)).
template <typename Product>
__global__ void gather_records(const WorkUnit* units, const std::int32_t* tile_col, std::int64_t chunk_first_tile,
                               Product product, std::int32_t row0, std::int32_t col0, std::int32_t a_row_begin,
                               std::int32_t m, std::byte* out, unsigned int* zero_tiles) {
  __shared__ unsigned int nonzero[kThreadsPerUnit];
  const WorkUnit unit = units[blockIdx.x];
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  const std::int64_t stride = 8 + 4 * mm;
  for (int t = threadIdx.x; t < kThreadsPerUnit; t += blockDim.x) nonzero[t] = 0;
  __syncthreads();
  for (std::int64_t v = threadIdx.x; v < unit.tiles * mm; v += blockDim.x) {
    const int local = static_cast<int>(v / mm);
    const int e = static_cast<int>(v % mm);
    const std::int64_t tile = unit.first_tile + local;
    const std::int32_t j = tile_col[tile - chunk_first_tile];
    const std::int64_t r = static_cast<std::int64_t>(unit.row - row0) * m + e / m;
    const std::int64_t c = static_cast<std::int64_t>(j - col0) * m + e % m;
    const std::uint32_t value = product(r, c);
    std::byte* record = out + (tile - chunk_first_tile) * stride;
    if (e == 0) {
      reinterpret_cast<std::int32_t*>(record)[0] = a_row_begin + unit.row;
      reinterpret_cast<std::int32_t*>(record)[1] = j;
    }
    reinterpret_cast<std::uint32_t*>(record + 8)[e] = value;
    if (value != 0) atomicOr(&nonzero[local], 1u);
  }
  __syncthreads();
  for (int local = threadIdx.x; local < unit.tiles; local += blockDim.x)
    if (nonzero[local] == 0) atomicAdd(zero_tiles, 1u);
}

}  // namespace blockmm::kernels::cuda
