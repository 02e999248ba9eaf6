// Pinned host memory for the staging slots that records pass through on their way to the device
// (the build's readers) and that output records come back through (the chunk pipeline).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cuda/device_memory.cuh"

namespace blockmm::kernels::cuda {

// Host memory on transparent huge pages where the kernel gives them, populated. No CUDA call:
// it can be made while the context starts (warm_up_cuda). Throws std::bad_alloc.
class HugePageMemory {
 public:
  HugePageMemory() = default;
  explicit HugePageMemory(std::size_t bytes);
  ~HugePageMemory();
  HugePageMemory(HugePageMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  HugePageMemory& operator=(HugePageMemory&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  std::byte* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }  // rounded up to whole 2 MiB pages

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Host memory registered with CUDA (pinned). cudaMallocHost pins 4 KiB pages one by one, which
// costs the first read a noticeable wait; registering populated 2 MiB pages is several times
// cheaper.
class RegisteredBuffer {
 public:
  // Huge-page memory registered; a PinnedBuffer (cudaMallocHost) where registering fails.
  explicit RegisteredBuffer(std::size_t bytes);
  // `memory` registered; holds nothing (get() == nullptr) where CUDA refuses it.
  explicit RegisteredBuffer(HugePageMemory memory);
  ~RegisteredBuffer();
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  std::byte* get() const { return registered_ ? memory_.get() : fallback_.get(); }
  std::size_t bytes() const { return bytes_; }  // 0 where it holds nothing

 private:
  bool register_memory();

  HugePageMemory memory_;
  bool registered_ = false;  // memory_ is registered; else the fallback (if any) holds the memory
  PinnedBuffer fallback_;
  std::size_t bytes_ = 0;
};

// Pinned buffers that records pass through on their way to the device, one per reading thread,
// kept by the backend for both operands (pinning memory is slow; doing it once is enough).
class StagingBuffers {
 public:
  // Small slots: 16 readers pin 64 MiB in all; the numeric phase copies back through 8 (32 MiB
  // in flight).
  static constexpr std::int64_t kSlotBytes = std::int64_t{4} << 20;
  static constexpr int kReaders = 16;
  static constexpr int kCopyBackSlots = 8;
  // Slots the build's readers (at most 16, one a thread, one a 2 MiB piece of the inputs) and
  // the numeric phase's copy-back (8) use: what warm_up_cuda pins ahead of the backend.
  static int slots_for(std::int64_t input_bytes, int threads);
  // Grows to `slots` buffers (never shrinks), the new ones pinned together.
  void reserve(int slots) {
    const int have = static_cast<int>(slots_.size());
    if (slots <= have) return;
    adopt(std::make_unique<RegisteredBuffer>(static_cast<std::size_t>((slots - have) * kSlotBytes)));
  }
  // Takes a region pinned elsewhere (warm_up_cuda) as slots of its own, a slot for each whole
  // kSlotBytes; an empty one adds none.
  void adopt(std::unique_ptr<RegisteredBuffer> region) {
    if (region == nullptr || region->get() == nullptr) return;
    const auto slots = static_cast<std::int64_t>(region->bytes()) / kSlotBytes;
    for (std::int64_t s = 0; s < slots; ++s) slots_.push_back(region->get() + s * kSlotBytes);
    regions_.push_back(std::move(region));
  }
  std::byte* slot(int s) const { return slots_[static_cast<std::size_t>(s)]; }

 private:
  std::vector<std::unique_ptr<RegisteredBuffer>> regions_;
  std::vector<std::byte*> slots_;
};

}  // namespace blockmm::kernels::cuda
