// Kernels of the dense-tile path: scatter block panels into dense float64 tiles for cuBLAS,
// and gather the product back into output records. float64 is exact here: each product of
// two uint16 is below 2^32 and every sum of at most n < 2^21 of them is below 2^53.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels::cuda {

constexpr std::int64_t kDenseMaxOrder = std::int64_t{1} << 21;  // float64 stays exact below this n

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

// Dense A tile, column-major [rows x n]: A's blocks of panel rows [row0, row0 + rows / m).
// Blocks of those rows are contiguous in CSR order: [first_block, first_block + blocks).
__global__ void scatter_a_tile(const std::int32_t* a_row_ptr, const std::int32_t* a_col, const std::uint16_t* a_values,
                               std::int32_t m, std::int32_t row0, std::int32_t tile_rows, std::int32_t first_block,
                               std::int64_t values, double* dense) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < values;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = first_block + v / mm;
    const int e = static_cast<int>(v % mm);
    const std::int32_t row = owner_of_entry(a_row_ptr, row0, row0 + tile_rows / m, b);
    const std::int64_t r = static_cast<std::int64_t>(row - row0) * m + e / m;
    const std::int64_t c = static_cast<std::int64_t>(a_col[b]) * m + e % m;
    dense[r + c * tile_rows] = static_cast<double>(a_values[b * mm + e]);
  }
}

// Dense B tile, column-major [n x cols]: B's blocks of block-columns [col0, col0 + cols / m),
// which are contiguous in CSC order: entries [first_entry, first_entry + entries).
__global__ void scatter_b_tile(const std::int32_t* b_col_ptr, const std::int32_t* b_csc_row,
                               const std::int32_t* b_csc_block, const std::uint16_t* b_values, std::int32_t m,
                               std::int32_t col0, std::int32_t tile_cols, std::int64_t n, std::int32_t first_entry,
                               std::int64_t values, double* dense) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < values;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t entry = first_entry + v / mm;
    const int e = static_cast<int>(v % mm);
    const std::int32_t col = owner_of_entry(b_col_ptr, col0, col0 + tile_cols / m, entry);
    const std::int64_t r = static_cast<std::int64_t>(b_csc_row[entry]) * m + e / m;
    const std::int64_t c = static_cast<std::int64_t>(col - col0) * m + e % m;
    dense[r + c * n] = static_cast<double>(b_values[static_cast<std::int64_t>(b_csc_block[entry]) * mm + e]);
  }
}

// Output records of the units' tiles from the dense product tile C (column-major
// [tile_rows x tile_cols], element (0, 0) = block (row0, col0)).
__global__ void gather_records(const WorkUnit* units, const std::int32_t* tile_col, std::int64_t chunk_first_tile,
                               const double* c_tile, std::int32_t tile_rows, std::int32_t row0, std::int32_t col0,
                               std::int32_t a_row_begin, std::int32_t m, std::byte* out, unsigned int* zero_tiles) {
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
    const double x = c_tile[r + c * tile_rows];
    const std::uint32_t value = x >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
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
