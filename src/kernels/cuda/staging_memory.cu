// Host memory for the staging slots: huge pages, populated, registered with CUDA.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cuda/staging_memory.cuh"

namespace blockmm::kernels::cuda {

HugePageMemory::HugePageMemory(std::size_t bytes) {
  if (bytes == 0) return;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = nullptr;
  if (::posix_memalign(&memory, kHugePage, rounded) != 0) throw std::bad_alloc();
  (void)::madvise(memory, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages work too
  // Populated by the kernel where it can (Linux 5.14), else here; a huge page a call, so that the
  // process's memory map is never held for long: the CUDA context may be starting beside this,
  // mapping memory of its own.
  auto* page = static_cast<std::byte*>(memory);
  for (std::size_t at = 0; at < rounded; at += kHugePage) {
    bool populated = false;
#if defined(MADV_POPULATE_WRITE)
    populated = ::madvise(page + at, kHugePage, MADV_POPULATE_WRITE) == 0;
#endif
    if (!populated) std::memset(page + at, 0, kHugePage);
  }
  data_ = static_cast<std::byte*>(memory);
  bytes_ = rounded;
}

HugePageMemory::~HugePageMemory() { std::free(data_); }

RegisteredBuffer::RegisteredBuffer(HugePageMemory memory) : memory_(std::move(memory)) { register_memory(); }

RegisteredBuffer::RegisteredBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  try {
    memory_ = HugePageMemory(bytes);
  } catch (const std::bad_alloc&) {  // no aligned memory: cudaMallocHost below
  }
  if (register_memory()) return;
  fallback_ = PinnedBuffer(bytes);
  bytes_ = bytes;
}

bool RegisteredBuffer::register_memory() {
  if (memory_.get() == nullptr) return false;
  if (cudaHostRegister(memory_.get(), memory_.bytes(), cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // not the run's error: pinned otherwise, or left to the backend
    memory_ = HugePageMemory();
    return false;
  }
  registered_ = true;
  bytes_ = memory_.bytes();
  return true;
}

RegisteredBuffer::~RegisteredBuffer() {
  if (registered_) (void)cudaHostUnregister(memory_.get());  // a destructor cannot report it
}

int StagingBuffers::slots_for(std::int64_t input_bytes, int threads) {
  const std::int64_t pieces = (std::max<std::int64_t>(0, input_bytes) + kSlotBytes / 2 - 1) / (kSlotBytes / 2);
  return static_cast<int>(
      std::max<std::int64_t>(kCopyBackSlots, std::min<std::int64_t>({kReaders, std::max(1, threads), pieces})));
}

}  // namespace blockmm::kernels::cuda
