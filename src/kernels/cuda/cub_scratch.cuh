// Host-side helpers around CUB that the device build and the symbolic phase share: temporary
// storage grown on demand, zeroed arrays, row pointers from counts.
#pragma once

#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device_memory.cuh"

namespace blockmm::kernels::cuda {

// Bits that hold every value in [0, count): at least 1.
inline int bits_for(std::int64_t count) {
  int bits = 1;
  while (bits < 62 && (std::int64_t{1} << bits) < count) ++bits;
  return bits;
}

// CUB's temporary storage, grown on demand.
class CubScratch {
 public:
  void* get(std::size_t bytes) {
    if (bytes > buffer_.bytes()) buffer_ = DeviceArray<std::byte>(bytes);
    return buffer_.get();
  }

 private:
  DeviceArray<std::byte> buffer_;
};

template <typename T>
void zero(DeviceArray<T>& array, cudaStream_t stream) {
  if (array.bytes() > 0) BLOCKMM_CUDA_CHECK(cudaMemsetAsync(array.get(), 0, array.bytes(), stream));
}

// Exclusive sum of `count` int32 counts into `count + 1` pointers (the last one the total).
template <typename In, typename Out>
void exclusive_pointers(const In* counts, std::int64_t count, Out* pointers, CubScratch& scratch, cudaStream_t stream) {
  BLOCKMM_CUDA_CHECK(cudaMemsetAsync(pointers, 0, sizeof(Out), stream));
  if (count == 0) return;
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, counts, pointers + 1, count, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::InclusiveSum(scratch.get(bytes), bytes, counts, pointers + 1, count, stream));
}

}  // namespace blockmm::kernels::cuda
