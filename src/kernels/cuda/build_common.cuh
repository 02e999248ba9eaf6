// What the build's and the symbolic phase's kernels share: grid-stride indexing and the row
// pointers of sorted (row, column) keys. Only templates and inline device functions, so that
// both .cu files may include it.
#pragma once

#include <cuda_runtime.h>

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

// Where each row starts in keys sorted by (row, column), row = key >> col_bits: starts[r] is the
// first s whose row is r or more, mapped through `position` where given (CSR row pointers of the
// kept blocks), and starts[rows] the end. Each entry is written once, by the key where the row
// changes (no counters: atomics on one row's counter serialise a warp whose keys all share that
// row, which made them a large share of a dense operand's build).
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

}  // namespace blockmm::kernels::cuda
