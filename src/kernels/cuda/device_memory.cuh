// Owning handles for device and pinned host memory, and streams/events, so that every exit
// path (including exceptions from the sink) releases them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/large_buffer.hpp"
#include "kernels/cuda/cuda_check.cuh"

namespace blockmm::kernels::cuda {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count > 0) BLOCKMM_CUDA_CHECK(cudaMalloc(&data_, count * sizeof(T)));
  }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept : data_(std::exchange(other.data_, nullptr)), count_(other.count_) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  T* get() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) BLOCKMM_CUDA_CHECK(cudaMallocHost(&data_, bytes));
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  std::byte* get() const { return static_cast<std::byte*>(data_); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { BLOCKMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false) {
    BLOCKMM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Copies between host and device on `stream`: the checked, counted forms both the build and the
// numeric phase use. download() waits for the stream; upload() leaves `host` in use until it
// has run (a pageable source makes the copy synchronous anyway).
template <typename T>
DeviceArray<T> upload(const T* host, std::int64_t count, cudaStream_t stream) {
  DeviceArray<T> device(static_cast<std::size_t>(count));
  if (count > 0)
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(device.get(), host, static_cast<std::size_t>(count) * sizeof(T),
                                       cudaMemcpyHostToDevice, stream));
  return device;
}

// Into a fresh host vector of `count` elements (std::vector, or HugePageVector below).
template <typename Vector, typename T>
Vector download_into_new(const T* device, std::int64_t count, cudaStream_t stream) {
  Vector host(static_cast<std::size_t>(count));
  if (count > 0)
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, static_cast<std::size_t>(count) * sizeof(T),
                                       cudaMemcpyDeviceToHost, stream));
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

template <typename T>
std::vector<T> download(const T* device, std::int64_t count, cudaStream_t stream) {
  return download_into_new<std::vector<T>>(device, count, stream);
}

// Into host memory on huge pages (core/large_buffer.hpp): for arrays of one entry a block-row,
// whose 4 KiB page faults cost more than the copy (with a million rows, say).
template <typename T>
HugePageVector<T> download_rows(const T* device, std::int64_t count, cudaStream_t stream) {
  return download_into_new<HugePageVector<T>>(device, count, stream);
}

template <typename T>
T download_one(const T* device, cudaStream_t stream) {
  return download(device, 1, stream)[0];
}

// Blocks of `threads` for a grid-stride loop over `items` (at least one, at most 2^20).
inline unsigned int grid_for(std::int64_t items, int threads = 256) {
  return static_cast<unsigned int>(
      std::max<std::int64_t>(1, std::min<std::int64_t>((items + threads - 1) / threads, std::int64_t{1} << 20)));
}

}  // namespace blockmm::kernels::cuda
