// Vectors for large arrays that are overwritten right after allocation. std::vector's resize
// zero-fills, which costs a pass over memory and takes every page fault on one thread; this
// allocator leaves elements default-initialised (uninitialised for bytes and integers), and
// maps allocations from its threshold on directly, asking for transparent huge pages so that
// the threads that first touch the memory fault 2 MiB at a time. LargeVector maps from 32 MiB;
// HugePageVector from 2 MiB, for arrays of one entry a block-row that one thread fills (the
// cuda backend's host copies of its row pointers: with millions of rows, a download into 4 KiB
// pages spends much of its time in page faults that huge pages mostly avoid).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace blockmm {

template <typename T, std::size_t MapThreshold = (std::size_t{32} << 20)>
class LargeBufferAllocator {
 public:
  using value_type = T;
  static constexpr std::size_t kMapThreshold = MapThreshold;
  template <typename U>
  struct rebind {
    using other = LargeBufferAllocator<U, MapThreshold>;
  };

  LargeBufferAllocator() noexcept = default;
  template <typename U>
  LargeBufferAllocator(const LargeBufferAllocator<U, MapThreshold>&) noexcept {}

  T* allocate(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kMapThreshold) return std::allocator<T>().allocate(count);
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    (void)::madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(memory);
  }

  void deallocate(T* pointer, std::size_t count) noexcept {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kMapThreshold) {
      std::allocator<T>().deallocate(pointer, count);
      return;
    }
    ::munmap(pointer, bytes);
  }

  // Default-initialise instead of value-initialise: no zero-fill on resize.
  template <typename U>
  void construct(U* pointer) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(pointer)) U;
  }
  template <typename U, typename... Args>
  void construct(U* pointer, Args&&... args) {
    ::new (static_cast<void*>(pointer)) U(std::forward<Args>(args)...);
  }

  friend bool operator==(const LargeBufferAllocator&, const LargeBufferAllocator&) noexcept { return true; }
  friend bool operator!=(const LargeBufferAllocator&, const LargeBufferAllocator&) noexcept { return false; }
};

template <typename T>
using LargeVector = std::vector<T, LargeBufferAllocator<T>>;

template <typename T>
using HugePageVector = std::vector<T, LargeBufferAllocator<T, (std::size_t{2} << 20)>>;

}  // namespace blockmm
