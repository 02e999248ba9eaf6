// The mapped writer's parts (mapped_pages.hpp).
#include "io/mapped_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.hpp"
#include "core/madvise_advice.hpp"

namespace blockmm::io::mapped {
namespace {

// A part smaller than this is not worth a thread's wake-up; 4 MiB pinned slots (the cuda
// backend's) still split eight ways.
constexpr std::int64_t kMinPartBytes = std::int64_t{256} << 10;

// Address space congruent to file offsets modulo 2 MiB: `bytes` of it, inaccessible, and where
// file offset `first` goes. Returns the reservation (null where refused) and sets *at.
void* reserve_aligned(std::int64_t first, std::size_t bytes, std::int64_t* at) {
  const std::size_t reserved = bytes + static_cast<std::size_t>(kHugeBytes);
  void* area = ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (area == MAP_FAILED) return nullptr;
  // The first address at or above the reservation's start congruent to `first` modulo 2 MiB.
  const auto base = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(area));
  const std::int64_t phase = first % kHugeBytes;
  *at = round_up(base - phase, kHugeBytes) + phase;
  return area;
}

void* address(std::int64_t at) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(at)); }

}  // namespace

std::int64_t page_bytes() {
  static const std::int64_t page = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::int64_t>(size) : std::int64_t{4096};
  }();
  return page;
}

Window::Window(int fd, std::int64_t offset, std::int64_t bytes) {
  first_ = round_down(offset, page_bytes());
  length_ = static_cast<std::size_t>(offset + bytes - first_);
  // Address space for the map and its alignment, then the file mapped over it (MAP_FIXED
  // replaces the reservation's pages; the whole reservation is unmapped at the end).
  reserved_ = length_ + static_cast<std::size_t>(kHugeBytes);
  std::int64_t at = 0;
  area_ = reserve_aligned(first_, length_, &at);
  if (area_ == nullptr) return;
  void* map = ::mmap(address(at), length_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(first_));
  if (map == MAP_FAILED) return;
  map_ = static_cast<std::byte*>(map);
  data_ = map_ + (offset - first_);
}

int Window::unmap() {
  if (area_ == nullptr) return 0;
  const int result = ::munmap(area_, reserved_) == 0 ? 0 : errno;
  area_ = nullptr;
  map_ = data_ = nullptr;
  return result;
}

int prepare_range(std::byte* at, std::int64_t lo, std::int64_t hi, bool huge, ExtentCounts* counts,
                  std::int64_t collapse_end) {
  if (hi <= lo) return 0;
  const std::int64_t page = page_bytes();
  if (huge) {
    const std::int64_t h0 = round_up(lo, kHugeBytes), h1 = round_down(std::max(hi, collapse_end), kHugeBytes);
    if (h1 > h0) {
      for (std::int64_t h = h0; h < h1; h += kHugeBytes)
        if (::madvise(at + (h - lo), static_cast<std::size_t>(page), MADV_POPULATE_WRITE) != 0 && errno != EINVAL &&
            errno != EINTR)
          return errno;
      // One call for the range: each call first drains every CPU's page batches.
      const bool collapsed = ::madvise(at + (h0 - lo), static_cast<std::size_t>(h1 - h0), MADV_COLLAPSE) == 0;
      if (counts != nullptr) (collapsed ? counts->huge : counts->small) += (h1 - h0) / kHugeBytes;
    }
  }
  const auto start = reinterpret_cast<std::uintptr_t>(at);
  const std::uintptr_t first = start / page * page;
  if (::madvise(reinterpret_cast<void*>(first), static_cast<std::size_t>(start + (hi - lo) - first), MADV_POPULATE_WRITE) != 0 &&
      errno != EINVAL && errno != EINTR)
    return errno;
  return 0;
}

std::vector<std::int64_t> cut(std::int64_t lo, std::int64_t hi, std::int64_t parts, bool huge) {
  const std::int64_t unit = huge && hi - lo >= 2 * kHugeBytes ? kHugeBytes : page_bytes();
  parts = std::max<std::int64_t>(1, std::min(parts, (hi - lo) / std::max(unit, kMinPartBytes)));
  std::vector<std::int64_t> cuts{lo};
  for (std::int64_t k = 1; k < parts; ++k) {
    const std::int64_t at = round_up(lo + (hi - lo) * k / parts, unit);
    if (at > cuts.back() && at < hi) cuts.push_back(at);
  }
  cuts.push_back(hi);
  return cuts;
}

Team::Team(int helpers) {
  for (int t = 0; t < helpers; ++t) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      break;
    }
  }
}

Team::~Team() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
}

int Team::run(std::int64_t parts, const std::function<int(std::int64_t)>& part) {
  if (parts <= 0) return 0;
  if (parts == 1 || workers_.empty()) {
    int error = 0;
    for (std::int64_t k = 0; k < parts && error == 0; ++k) error = part(k);
    return error;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &part;
    parts_ = parts;
    next_part_.store(0, std::memory_order_relaxed);
    error_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_parts(part, parts);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return busy_ == 0; });  // no worker still runs a part
  job_ = nullptr;
  return error_.load(std::memory_order_relaxed);
}

void Team::run_parts(const std::function<int(std::int64_t)>& part, std::int64_t parts) {
  for (std::int64_t k; (k = next_part_.fetch_add(1, std::memory_order_relaxed)) < parts;) {
    const int error = part(k);
    int none = 0;
    if (error != 0) error_.compare_exchange_strong(none, error, std::memory_order_relaxed);
  }
}

void Team::work() {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<int(std::int64_t)>* job = job_;
    const std::int64_t parts = parts_;
    lock.unlock();
    run_parts(*job, parts);
    lock.lock();
    if (--busy_ == 0) done_.notify_one();
  }
}

FileMap::FileMap(int fd, std::int64_t size, std::int64_t window_bytes) : fd_(fd), size_(size), window_(window_bytes) {
  if (size <= 0) return;
  reserved_ = static_cast<std::size_t>(size) + static_cast<std::size_t>(kHugeBytes);
  std::int64_t at = 0;
  area_ = reserve_aligned(0, static_cast<std::size_t>(size), &at);
  if (area_ == nullptr) return;
  base_ = static_cast<std::byte*>(address(at));
  slots_.resize(slot_of(size - 1) + 1);
}

void FileMap::expect(std::int64_t offset, std::int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::int64_t at = offset; at < offset + bytes;) {
    const std::int64_t end = std::min(offset + bytes, round_down(at, window_) + window_);
    slots_[slot_of(at)].expected += end - at;
    at = end;
  }
}

std::byte* FileMap::map(std::int64_t offset, std::int64_t bytes) {
  if (base_ == nullptr || offset < 0 || bytes <= 0 || offset > size_ - bytes) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t s = slot_of(offset); s <= slot_of(offset + bytes - 1); ++s) {
    Slot& slot = slots_[s];
    if (slot.state == State::released) return nullptr;
    if (slot.state == State::mapped) continue;
    const std::int64_t first = static_cast<std::int64_t>(s) * window_;
    const auto length = static_cast<std::size_t>(std::min(window_, size_ - first));
    if (::mmap(base_ + first, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, static_cast<off_t>(first)) ==
        MAP_FAILED)
      return nullptr;
    slot.state = State::mapped;
  }
  return base_ + offset;
}

int FileMap::written(std::int64_t offset, std::int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::int64_t at = offset; at < offset + bytes;) {
    const std::int64_t end = std::min(offset + bytes, round_down(at, window_) + window_);
    Slot& slot = slots_[slot_of(at)];
    slot.written += end - at;
    if (slot.state == State::mapped && slot.expected > 0 && slot.written >= slot.expected) {
      // Its pages unmapped, its range inaccessible again: still the reservation's.
      const std::int64_t first = round_down(at, window_);
      const auto length = static_cast<std::size_t>(std::min(window_, size_ - first));
      if (::mmap(base_ + first, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
          MAP_FAILED)
        return errno;
      slot.state = State::released;
    }
    at = end;
  }
  return 0;
}

bool FileMap::released(std::int64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset >= 0 && offset < size_ && slots_[slot_of(offset)].state == State::released;
}

int FileMap::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (area_ == nullptr) return 0;
  const int result = ::munmap(area_, reserved_) == 0 ? 0 : errno;
  area_ = nullptr;
  base_ = nullptr;
  return result;
}

[[noreturn]] void cannot_write(const std::string& shown, std::int64_t offset, std::int64_t bytes, int error) {
  throw OutputError(shown + ": cannot write bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                    ") of the temporary file: " +
                    (error == EFAULT ? std::string("the file system could not back them (full?)")
                                     : std::string(std::strerror(error))));
}

}  // namespace blockmm::io::mapped
