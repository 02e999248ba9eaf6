// Owning handles for device and pinned host memory, and streams/events, so that every exit
// path (including exceptions from the sink) releases them. Every device array is charged to its
// GPU's ledger (device_ledger.hpp) while it lives.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/large_buffer.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device_ledger.hpp"

namespace blockmm::kernels::cuda {

// Where the ledger of `device` samples the GPU's free memory (every allocation and free, where a
// backend asked for it): only while `device` is the current device, whose memory cudaMemGetInfo
// reports. Never throws (it runs in destructors too).
inline void observe_device_memory(int device) {
  DeviceLedger& ledger = device_ledger(device);
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) return;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) ledger.observe(static_cast<std::int64_t>(free_bytes));
}

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  // `count` elements on the current device, charged to its ledger.
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count == 0) return;
    BLOCKMM_CUDA_CHECK(cudaGetDevice(&device_));
    BLOCKMM_CUDA_CHECK(cudaMalloc(&data_, count * sizeof(T)));
    charged_ = allocation_footprint(static_cast<std::int64_t>(bytes()));
    ledger_ = &device_ledger(device_);
    ledger_->charge(charged_);
    if (ledger_->probing()) observe_device_memory(device_);
  }
  // `count` elements of pinned host memory that kernels on every GPU read in place, over the
  // host link (unified addressing: the host pointer is the device pointer): for an operand the
  // device memory cannot hold. No device memory, nothing charged.
  static DeviceArray in_host_memory(std::size_t count) {
    DeviceArray array;
    array.count_ = count;
    if (count == 0) return array;
    void* host = nullptr;
    BLOCKMM_CUDA_CHECK(cudaHostAlloc(&host, count * sizeof(T), cudaHostAllocPortable | cudaHostAllocMapped));
    array.host_ = std::shared_ptr<void>(host, [](void* p) { cudaFreeHost(p); });
    void* device = nullptr;
    BLOCKMM_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    array.data_ = static_cast<T*>(device);
    return array;
  }
  ~DeviceArray() { free(); }
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    swap(other);
    return *this;
  }
  T* get() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  // In host memory (in_host_memory), not on a device; where the host writes it.
  bool host_resident() const { return host_ != nullptr; }
  T* host_data() const { return static_cast<T*>(host_.get()); }
  // The device memory it takes: its footprint, 0 in host memory.
  std::int64_t device_bytes() const { return charged_; }
  // A second handle on the same host memory (a host-resident array only: every GPU reads it).
  DeviceArray share_host_memory() const {
    DeviceArray array;
    array.data_ = data_;
    array.count_ = count_;
    array.host_ = host_;
    return array;
  }

 private:
  void swap(DeviceArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(device_, other.device_);
    std::swap(charged_, other.charged_);
    std::swap(ledger_, other.ledger_);
    std::swap(host_, other.host_);
  }
  // The GPU's free memory is sampled before the free, while the array still counts.
  void free() noexcept {
    if (ledger_ == nullptr) return;
    if (ledger_->probing()) observe_device_memory(device_);
    cudaFree(data_);
    ledger_->release(charged_);
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
  int device_ = -1;
  std::int64_t charged_ = 0;
  DeviceLedger* ledger_ = nullptr;  // set for device memory
  std::shared_ptr<void> host_;  // host-resident: the pinned memory, shared by every handle on it
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

// Into a fresh host vector of `count` elements (std::vector, or LargeVector below).
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
LargeVector<T> download_rows(const T* device, std::int64_t count, cudaStream_t stream) {
  return download_into_new<LargeVector<T>>(device, count, stream);
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
