#include "io/mapped_writer.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace blockmm::io {
namespace {

// A part smaller than this is not worth a thread's wake-up; 4 MiB pinned slots (the cuda
// backend's) still split eight ways.
constexpr std::int64_t kMinPartBytes = std::int64_t{256} << 10;
// As PosixWriter: start write-back of large writes at once, so that the final fsync has little left.
constexpr std::int64_t kEarlyWritebackBytes = std::int64_t{4} << 20;
constexpr int kDefaultWriteThreads = 8;

std::int64_t page_bytes() {
  static const std::int64_t page = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::int64_t>(size) : std::int64_t{4096};
  }();
  return page;
}

// Copies one part; returns 0, or the errno that stopped it before anything was copied. The map's
// pages are faulted in by one madvise per part where the kernel has MADV_POPULATE_WRITE (5.14):
// one call instead of a page fault per 4 KiB page, and a page the file system cannot back is an
// error code there, not a SIGBUS in the copy (the reservation should have made that impossible;
// this is the second line). EINVAL (an older kernel) or EINTR only mean the copy faults the
// pages in itself.
int copy_part(std::byte* destination, const std::byte* source, std::int64_t bytes) {
#if defined(MADV_POPULATE_WRITE)
  const std::int64_t page = page_bytes();
  const auto start = reinterpret_cast<std::uintptr_t>(destination);
  const std::uintptr_t first = start / page * page;
  if (::madvise(reinterpret_cast<void*>(first), static_cast<std::size_t>(start + bytes - first), MADV_POPULATE_WRITE) != 0 &&
      errno != EINVAL && errno != EINTR)
    return errno;
#endif
  std::memcpy(destination, source, static_cast<std::size_t>(bytes));
  return 0;
}

// Threads that copy parts of one write_at at a time; the calling thread copies parts too.
class CopyTeam {
 public:
  // Starts up to `helpers` threads; fewer where the system refuses more (the copies still happen,
  // on fewer threads).
  explicit CopyTeam(int helpers) {
    for (int t = 0; t < helpers; ++t) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        break;
      }
    }
  }
  ~CopyTeam() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  CopyTeam(const CopyTeam&) = delete;
  CopyTeam& operator=(const CopyTeam&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Returns 0, or the first errno a part met (the copying threads' errors end here).
  int copy(std::byte* destination, const std::byte* source, std::int64_t bytes) {
    const std::int64_t parts = std::min<std::int64_t>(threads(), std::max<std::int64_t>(1, bytes / kMinPartBytes));
    if (parts <= 1) return copy_part(destination, source, bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{destination, source, bytes, parts};
      next_part_.store(0, std::memory_order_relaxed);
      error_.store(0, std::memory_order_relaxed);
      busy_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    wake_.notify_all();
    run_parts(job_);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });  // no worker still reads job_ or the source
    return error_.load(std::memory_order_relaxed);
  }

 private:
  struct Job {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::int64_t bytes = 0;
    std::int64_t parts = 0;
  };

  void run_parts(const Job& job) {
    // Parts end on page boundaries of the destination where they can, so that no two threads
    // fault in the same page.
    const std::int64_t page = page_bytes();
    const std::int64_t share = (job.bytes / job.parts + page - 1) / page * page;
    for (std::int64_t k; (k = next_part_.fetch_add(1, std::memory_order_relaxed)) < job.parts;) {
      const std::int64_t lo = std::min(job.bytes, k * share);
      const std::int64_t hi = k + 1 == job.parts ? job.bytes : std::min(job.bytes, (k + 1) * share);
      if (hi <= lo) continue;
      const int error = copy_part(job.destination + lo, job.source + lo, hi - lo);
      int none = 0;
      if (error != 0) error_.compare_exchange_strong(none, error, std::memory_order_relaxed);
    }
  }

  void work() {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const Job job = job_;
      lock.unlock();
      run_parts(job);
      lock.lock();
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  Job job_;
  std::atomic<std::int64_t> next_part_{0};
  std::atomic<int> error_{0};
  std::uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
};

// Each large write maps just its own range, copies, and unmaps: tearing down a whole file's map
// at the end cost 0.3-0.6 s per 1.5 GB here, after the compute, where per-write unmaps run beside
// it (the cpu backend writes from a thread of its own); and the address space stays a chunk's.
class MappedWriter final : public FileWriter {
 public:
  MappedWriter(int fd, std::int64_t size, int threads, const std::string& shown)
      : shown_(shown), fd_(fd), size_(size), team_(threads - 1) {}
  ~MappedWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
    if (bytes == 0) return;
    if (offset < 0 || bytes < 0 || offset > size_ - bytes)
      throw Error(ExitCode::other, "internal error: " + shown_ + ": a write of bytes [" + std::to_string(offset) +
                                       ", " + std::to_string(offset + bytes) + ") outside the reserved " +
                                       std::to_string(size_));
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) throw OutputError(shown_ + ": write after the file was closed");
    const auto* in = static_cast<const std::byte*>(source);
    // Small writes (headers, indptr pieces) are cheaper as one pwrite than a map and an unmap.
    if (bytes < kMinPartBytes || !copy_through_map(offset, in, bytes)) write_fully(fd_, offset, in, bytes, shown_);
#if defined(__linux__)
    // Dirty pages of a shared map are written back like any others: start it now (see PosixWriter).
    if (bytes >= kEarlyWritebackBytes) (void)::sync_file_range(fd_, offset, bytes, SYNC_FILE_RANGE_WRITE);
#endif
  }

  void sync_and_close() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) return;
    if (::fsync(fd_) != 0) throw OutputError(shown_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw OutputError(shown_ + ": close failed: " + std::strerror(errno));
  }

 private:
  // False where this range cannot be mapped (an address-space limit, say): the caller pwrites it.
  bool copy_through_map(std::int64_t offset, const std::byte* source, std::int64_t bytes) {
    const std::int64_t first = offset / page_bytes() * page_bytes();
    const auto length = static_cast<std::size_t>(offset + bytes - first);
    void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(first));
    if (map == MAP_FAILED) return false;
    const int error = team_.copy(static_cast<std::byte*>(map) + (offset - first), source, bytes);
    const bool unmapped = ::munmap(map, length) == 0;
    const int unmap_error = errno;
    if (error != 0)
      throw OutputError(shown_ + ": cannot write bytes [" + std::to_string(offset) + ", " +
                        std::to_string(offset + bytes) + ") of the temporary file: " +
                        (error == EFAULT ? std::string("the file system could not back them (full?)")
                                         : std::string(std::strerror(error))));
    if (!unmapped) throw OutputError(shown_ + ": munmap failed: " + std::strerror(unmap_error));
    return true;
  }

  std::string shown_;
  int fd_ = -1;
  std::int64_t size_ = 0;
  std::mutex mutex_;
  CopyTeam team_;
};

}  // namespace

WriterPolicy writer_policy(int requested_threads, bool pwrite_only, bool tmpfs_fallocate, int rank_threads) {
  WriterPolicy policy;
  policy.tmpfs_fallocate = tmpfs_fallocate;
  if (pwrite_only) return policy;
  if (requested_threads > 0) {
    policy.threads = std::min(requested_threads, kMaxWriteThreads);
    policy.map_any_file = true;
    return policy;
  }
  const int threads = std::clamp(rank_threads, 1, kDefaultWriteThreads);
  policy.threads = threads >= kMinDefaultMapThreads ? threads : 0;
  return policy;
}

bool populate_reports_errors() {
#if defined(MADV_POPULATE_WRITE)
  // An empty range at an aligned address: 0 where the kernel knows the advice, EINVAL where not.
  static const bool known = ::madvise(reinterpret_cast<void*>(page_bytes()), 0, MADV_POPULATE_WRITE) == 0;
  return known;
#else
  return false;
#endif
}

namespace {

[[noreturn]] void cannot_reserve(std::int64_t bytes, const std::string& shown, const std::string& temporary, int error) {
  throw OutputError(shown + ": cannot reserve " + std::to_string(bytes) + " bytes for the temporary file " + temporary +
                    ": " + std::strerror(error));
}

// tmpfs: fallocate allocates every page, in one thread under the inode's lock (0.7-0.9 s per
// 1.5 GB on the development VM, before the numeric phase), and the map's first touch clears it
// again. The copying threads' MADV_POPULATE_WRITE allocates the same pages in parallel and
// reports a full tmpfs as an error, so here the size is set (a file-size limit fails now) and the
// free space checked now; a tmpfs filled by someone else meanwhile fails the write that finds it.
bool reserve_on_tmpfs(int fd, std::int64_t bytes, const struct statfs& fs, const std::string& shown,
                      const std::string& temporary) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) cannot_reserve(bytes, shown, temporary, errno);
  const std::int64_t have = static_cast<std::int64_t>(st.st_blocks) * 512;
  const std::int64_t free_bytes = static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_bsize);
  if (fs.f_blocks > 0 && bytes - have > free_bytes) cannot_reserve(bytes, shown, temporary, ENOSPC);
  if (st.st_size < bytes && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) cannot_reserve(bytes, shown, temporary, errno);
  return true;
}

}  // namespace

bool reserve_file_space(int fd, std::int64_t bytes, const std::string& shown, const std::string& temporary,
                        bool tmpfs_fallocate) {
  if (bytes <= 0) return true;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC && populate_reports_errors() && !tmpfs_fallocate)
    return reserve_on_tmpfs(fd, bytes, fs, shown, temporary);
  for (;;) {
    // fallocate(2), not posix_fallocate(3): where the file system cannot reserve, glibc would
    // emulate it by writing, which reserves nothing on a copy-on-write or compressed one.
    if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EOPNOTSUPP || errno == ENOSYS) return false;
    cannot_reserve(bytes, shown, temporary, errno);
  }
}

bool on_tmpfs(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

std::unique_ptr<FileWriter> make_mapped_writer(int fd, std::int64_t size, int threads, const std::string& shown) {
  if (size <= 0) return nullptr;
  // Whether this file maps at all (a character device, a file system without mmap: no).
  const auto probe_length = static_cast<std::size_t>(std::min(size, page_bytes()));
  void* probe = ::mmap(nullptr, probe_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (probe == MAP_FAILED) return nullptr;
  ::munmap(probe, probe_length);
  return std::make_unique<MappedWriter>(fd, size, std::max(1, threads), shown);
}

}  // namespace blockmm::io
