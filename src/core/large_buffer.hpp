// Vectors for large arrays that are overwritten right after allocation. std::vector's resize
// zero-fills, which costs a pass over memory and takes every page fault on one thread; this
// allocator leaves elements default-initialised (uninitialised for bytes and integers), and
// maps allocations of 2 MiB and more directly, at a 2 MiB boundary and asking for transparent
// huge pages, so that the threads that first touch the memory fault 2 MiB at a time (fresh 4 KiB
// pages cost about as much as a pass of a build or a download over small blocks). A mapping is
// exactly the bytes asked for, rounded to pages: address space follows the arrays (a user under
// `ulimit -v` or strict overcommit pays for nothing more).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace blockmm {

template <typename T>
class LargeBufferAllocator {
 public:
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kMapThreshold = kHugePage;
  template <typename U>
  struct rebind {
    using other = LargeBufferAllocator<U>;
  };

  LargeBufferAllocator() noexcept = default;
  template <typename U>
  LargeBufferAllocator(const LargeBufferAllocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    if (count > std::size_t(-1) / sizeof(T)) throw std::bad_alloc();
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kMapThreshold) return std::allocator<T>().allocate(count);
    // A huge page's worth more than asked, then the unaligned head and the tail beyond the bytes
    // given back: only whole 2 MiB pages at 2 MiB boundaries can be huge (the kernel aligns only
    // mappings whose length is a multiple of 2 MiB itself).
    const std::size_t length = page_round(bytes);
    if (length > std::size_t(-1) - kHugePage) throw std::bad_alloc();
    void* memory = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    char* const start = static_cast<char*>(memory);
    const std::size_t head = (kHugePage - reinterpret_cast<std::uintptr_t>(start) % kHugePage) % kHugePage;
    if (head > 0) (void)::munmap(start, head);
    (void)::munmap(start + head + length, kHugePage - head);
#if defined(MADV_HUGEPAGE)
    (void)::madvise(start + head, length, MADV_HUGEPAGE);
#endif
    return reinterpret_cast<T*>(start + head);
  }

  void deallocate(T* pointer, std::size_t count) noexcept {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kMapThreshold) {
      std::allocator<T>().deallocate(pointer, count);
      return;
    }
    ::munmap(pointer, page_round(bytes));
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

 private:
  static std::size_t page_round(std::size_t bytes) {
    static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
};

template <typename T>
using LargeVector = std::vector<T, LargeBufferAllocator<T>>;

}  // namespace blockmm
