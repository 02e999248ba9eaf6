// The mapped writer declared in mapped_writer.hpp; the writers' policy and the reservation are in
// write_policy.cpp.
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
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/madvise_advice.hpp"

namespace blockmm::io {
namespace {

// A part smaller than this is not worth a thread's wake-up; 4 MiB pinned slots (the cuda
// backend's) still split eight ways.
constexpr std::int64_t kMinPartBytes = std::int64_t{256} << 10;
// As PosixWriter: start write-back of large writes at once, so that the final fsync has little left.
constexpr std::int64_t kEarlyWritebackBytes = std::int64_t{4} << 20;
// A PMD-sized folio: what MADV_COLLAPSE makes, and the unit its maps are aligned to.
constexpr std::int64_t kHugeBytes = std::int64_t{2} << 20;
// The pages prepared ahead are mapped this much at a time.
constexpr std::int64_t kAheadStepBytes = std::int64_t{32} << 20;

std::int64_t page_bytes() {
  static const std::int64_t page = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::int64_t>(size) : std::int64_t{4096};
  }();
  return page;
}

std::int64_t round_down(std::int64_t value, std::int64_t unit) { return value / unit * unit; }
std::int64_t round_up(std::int64_t value, std::int64_t unit) { return (value + unit - 1) / unit * unit; }

// A file range [offset, offset + bytes) mapped MAP_SHARED at an address congruent to the offset
// modulo 2 MiB, so that a huge folio of the file can be mapped by one page-table entry and
// MADV_COLLAPSE accepts the range. Unmapped when destroyed.
class Window {
 public:
  Window(int fd, std::int64_t offset, std::int64_t bytes) {
    first_ = round_down(offset, page_bytes());
    length_ = static_cast<std::size_t>(offset + bytes - first_);
    // Address space for the map and its alignment, then the file mapped over it (MAP_FIXED
    // replaces the reservation's pages; the whole reservation is unmapped at the end).
    reserved_ = static_cast<std::size_t>(length_ + kHugeBytes);
    area_ = ::mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area_ == MAP_FAILED) {
      area_ = nullptr;
      return;
    }
    // The first address at or above the reservation's start congruent to the offset modulo 2 MiB.
    const auto base = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(area_));
    const std::int64_t phase = first_ % kHugeBytes;
    const std::int64_t at = round_up(base - phase, kHugeBytes) + phase;
    void* map = ::mmap(reinterpret_cast<void*>(static_cast<std::uintptr_t>(at)), length_, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(first_));
    if (map == MAP_FAILED) return;
    map_ = static_cast<std::byte*>(map);
    data_ = map_ + (offset - first_);
  }
  ~Window() { (void)unmap(); }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool valid() const { return map_ != nullptr; }
  std::byte* data() const { return data_; }  // the byte at `offset`
  // 0, or the errno of a failed munmap.
  int unmap() {
    if (area_ == nullptr) return 0;
    const int result = ::munmap(area_, reserved_) == 0 ? 0 : errno;
    area_ = nullptr;
    map_ = data_ = nullptr;
    return result;
  }

 private:
  void* area_ = nullptr;
  std::size_t reserved_ = 0;
  std::int64_t first_ = 0;
  std::size_t length_ = 0;
  std::byte* map_ = nullptr;
  std::byte* data_ = nullptr;
};

struct ExtentCounts {
  std::atomic<std::int64_t> huge{0};
  std::atomic<std::int64_t> small{0};
};

// Makes the pages of file bytes [lo, hi), mapped at `at`, present and writable; returns 0 or the
// errno that stopped it. Where `huge`, each whole 2 MiB extent of the range is first made one
// huge folio: MADV_COLLAPSE (Linux 6.1) does that on tmpfs even where its settings give new pages
// 4 KiB (shmem_enabled = never, no huge= mount option), but refuses an extent without any page,
// so one page of each is populated first. One insertion into the file's page cache a 2 MiB folio
// instead of 512: the lock of one file's page index is what bounds a single file's write rate.
// A collapse that fails (no huge page free, a kernel that refuses) leaves the extent in 4 KiB
// pages; the copy is the same. The populate calls fault the pages in once per range instead of
// once per page, and a page the file system cannot back is an error code there, never a SIGBUS
// in the copy.
// `collapse_end` >= hi: the extents up to it are made huge too (the mapping must reach it): the
// extent a write ends inside, which the next write goes on filling.
int prepare_range(std::byte* at, std::int64_t lo, std::int64_t hi, bool huge, ExtentCounts* counts,
                  std::int64_t collapse_end = -1) {
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

// Splits [lo, hi) into at most `parts` parts ending on page boundaries, or on 2 MiB boundaries
// where `huge` (a part then holds whole extents, which its own thread collapses). Returns the
// cut points (parts + 1 of them).
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

// Threads that run the parts of one job at a time; the calling thread runs parts too.
class Team {
 public:
  // Starts up to `helpers` threads; fewer where the system refuses more (the work still happens,
  // on fewer threads).
  explicit Team(int helpers) {
    for (int t = 0; t < helpers; ++t) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        break;
      }
    }
  }
  ~Team() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs part(0) ... part(parts - 1), each once, on the team; returns 0 or the first errno a
  // part returned.
  int run(std::int64_t parts, const std::function<int(std::int64_t)>& part) {
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

 private:
  void run_parts(const std::function<int(std::int64_t)>& part, std::int64_t parts) {
    for (std::int64_t k; (k = next_part_.fetch_add(1, std::memory_order_relaxed)) < parts;) {
      const int error = part(k);
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
      const std::function<int(std::int64_t)>* job = job_;
      const std::int64_t parts = parts_;
      lock.unlock();
      run_parts(*job, parts);
      lock.lock();
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  const std::function<int(std::int64_t)>* job_ = nullptr;
  std::int64_t parts_ = 0;
  std::atomic<std::int64_t> next_part_{0};
  std::atomic<int> error_{0};
  std::uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
};

[[noreturn]] void cannot_write(const std::string& shown, std::int64_t offset, std::int64_t bytes, int error) {
  throw OutputError(shown + ": cannot write bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                    ") of the temporary file: " +
                    (error == EFAULT ? std::string("the file system could not back them (full?)")
                                     : std::string(std::strerror(error))));
}

// Each large write maps just its own range, copies, and unmaps: tearing down a whole file's map
// at the end is a serial cost after the compute, where per-write unmaps run beside it (the cpu
// backend writes from a thread of its own); and the address space stays a chunk's.
class MappedWriter final : public FileWriter {
 public:
  MappedWriter(int fd, std::int64_t size, int threads, const std::string& shown, bool tmpfs, bool huge)
      : shown_(shown), fd_(fd), size_(size), tmpfs_(tmpfs), huge_(huge), team_(threads - 1) {}
  ~MappedWriter() override {
    stop_ahead();
    if (fd_ >= 0) ::close(fd_);
  }

  void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
    if (bytes == 0) return;
    check_inside(offset, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) throw OutputError(shown_ + ": write after the file was closed");
    const auto* in = static_cast<const std::byte*>(source);
    // Small writes (headers, indptr pieces) are cheaper as one pwrite than a map and an unmap.
    if (bytes < kMinPartBytes || !copy_through_map(offset, in, bytes)) write_fully(fd_, offset, in, bytes, shown_);
    note_written(offset, bytes);
    start_writeback(offset, bytes);
  }

  void write_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                    const std::vector<FieldCopy>& fields) override {
    std::int64_t total = 0;
    for (const FieldCopy& f : fields) {
      check_inside(f.file_offset, f.bytes * count);
      total += f.bytes * count;
    }
    if (total < kMinPartBytes) {
      FileWriter::write_fields(records, count, stride, fields);  // small: staged pwrites
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) throw OutputError(shown_ + ": write after the file was closed");
    if (!scatter_through_map(records, count, stride, fields)) unlocked_staged_write(records, count, stride, fields);
    for (const FieldCopy& f : fields) {
      note_written(f.file_offset, f.bytes * count);
      start_writeback(f.file_offset, f.bytes * count);
    }
  }

  void prepare_ahead(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, int threads) override {
    if (!tmpfs_ || threads <= 0) return;  // elsewhere the pages come from the disk: nothing to gain
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0 || !ahead_.empty()) return;
    for (const auto& [offset, bytes] : ranges) {
      if (bytes <= 0) continue;
      check_inside(offset, bytes);
      frontiers_.push_back(std::make_unique<Frontier>(offset, offset + bytes));
    }
    if (frontiers_.empty()) return;
    // The ranges' bytes in `threads` shares of consecutive extents, one background thread each.
    std::int64_t total = 0;
    for (const auto& f : frontiers_) total += f->end - f->begin;
    const std::int64_t shares = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, total / kAheadStepBytes));
    const std::int64_t share = round_up((total + shares - 1) / shares, kHugeBytes);
    std::int64_t skip = 0;
    for (std::int64_t s = 0; s < shares && skip < total; ++s, skip += share) {
      try {
        ahead_.emplace_back([this, skip, share] { run_ahead(skip, share); });
      } catch (const std::system_error&) {
        break;  // fewer helpers: the writes prepare their own pages
      }
    }
  }

  void sync_and_close() override {
    stop_ahead();
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) return;
    if (::fsync(fd_) != 0) throw OutputError(shown_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw OutputError(shown_ + ": close failed: " + std::strerror(errno));
  }

  WriterReport report() const override {
    WriterReport r;
    r.mapped = true;
    r.threads = team_.threads();
    r.huge_extents = counts_.huge.load();
    r.small_extents = counts_.small.load();
    return r;
  }

 private:
  // What the writes have covered of a range said ahead, so that the preparing threads skip it.
  struct Frontier {
    Frontier(std::int64_t b, std::int64_t e) : begin(b), end(e), written(b) {}
    std::int64_t begin, end;
    std::atomic<std::int64_t> written;
  };

  void check_inside(std::int64_t offset, std::int64_t bytes) const {
    if (offset < 0 || bytes < 0 || offset > size_ - bytes)
      throw Error(ExitCode::other, "internal error: " + shown_ + ": a write of bytes [" + std::to_string(offset) +
                                       ", " + std::to_string(offset + bytes) + ") outside the reserved " +
                                       std::to_string(size_));
  }

  void start_writeback(std::int64_t offset, std::int64_t bytes) {
#if defined(__linux__)
    // Dirty pages of a shared map are written back like any others: start it now (see PosixWriter).
    if (bytes >= kEarlyWritebackBytes) (void)::sync_file_range(fd_, offset, bytes, SYNC_FILE_RANGE_WRITE);
#endif
  }

  // A frontier moves only with writes that reach it: several writers of one range (a team's
  // backends, each from its own place in it) leave it where the first of them is, so that the
  // pages before the others' writes are still prepared for it.
  void note_written(std::int64_t offset, std::int64_t bytes) {
    for (const auto& f : frontiers_) {
      if (offset < f->begin || offset >= f->end) continue;
      std::int64_t seen = f->written.load(std::memory_order_relaxed);
      const std::int64_t end = std::min(f->end, offset + bytes);
      while (offset <= seen && seen < end && !f->written.compare_exchange_weak(seen, end, std::memory_order_relaxed)) {
      }
    }
  }

  // False where this range cannot be mapped (an address-space limit, say): the caller pwrites it.
  // Where a write of [offset, end) ends inside a 2 MiB extent that lies wholly in the file: that
  // extent's end (made huge with the write, so that the next write fills a huge folio), else end.
  std::int64_t tail_extent_end(std::int64_t end) const {
    const std::int64_t tail = round_up(end, kHugeBytes);
    return huge_ && tail <= size_ ? tail : end;
  }

  bool copy_through_map(std::int64_t offset, const std::byte* source, std::int64_t bytes) {
    const std::int64_t tail = tail_extent_end(offset + bytes);
    Window window(fd_, offset, tail - offset);
    if (!window.valid()) return false;
    const std::vector<std::int64_t> cuts = cut(offset, offset + bytes, team_.threads(), huge_);
    const int error = team_.run(static_cast<std::int64_t>(cuts.size()) - 1, [&](std::int64_t k) {
      const std::int64_t lo = cuts[k], hi = cuts[k + 1];
      std::byte* at = window.data() + (lo - offset);
      const int e = prepare_range(at, lo, hi, huge_, &counts_, k + 2 == static_cast<std::int64_t>(cuts.size()) ? tail : hi);
      if (e != 0) return e;
      std::memcpy(at, source + (lo - offset), static_cast<std::size_t>(hi - lo));
      return 0;
    });
    const int unmap_error = window.unmap();
    if (error != 0) cannot_write(shown_, offset, bytes, error);
    if (unmap_error != 0) throw OutputError(shown_ + ": munmap failed: " + std::strerror(unmap_error));
    return true;
  }

  // The fields' destinations mapped, their pages prepared by the team (extents split among it),
  // then the records split among it, each thread copying every field of its records.
  bool scatter_through_map(const std::byte* records, std::int64_t count, std::int64_t stride,
                           const std::vector<FieldCopy>& fields) {
    std::vector<std::unique_ptr<Window>> windows;
    struct Piece {
      std::size_t field;
      std::int64_t lo, hi, collapse_end;
    };
    std::vector<Piece> pieces;
    for (std::size_t f = 0; f < fields.size(); ++f) {
      const std::int64_t bytes = fields[f].bytes * count;
      const std::int64_t end = fields[f].file_offset + bytes;
      windows.push_back(bytes > 0 ? std::make_unique<Window>(fd_, fields[f].file_offset, tail_extent_end(end) - fields[f].file_offset)
                                  : nullptr);
      if (bytes == 0) continue;
      if (!windows.back()->valid()) return false;
      const std::vector<std::int64_t> cuts = cut(fields[f].file_offset, end, team_.threads(), huge_);
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k)
        pieces.push_back({f, cuts[k], cuts[k + 1], k + 2 == cuts.size() ? tail_extent_end(end) : cuts[k + 1]});
    }
    int error = team_.run(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t k) {
      const Piece& p = pieces[static_cast<std::size_t>(k)];
      return prepare_range(windows[p.field]->data() + (p.lo - fields[p.field].file_offset), p.lo, p.hi, huge_, &counts_,
                           p.collapse_end);
    });
    if (error == 0) {
      const std::int64_t per_part = std::max<std::int64_t>(1, (count + team_.threads() - 1) / team_.threads());
      error = team_.run((count + per_part - 1) / per_part, [&](std::int64_t k) {
        const std::int64_t t0 = k * per_part, t1 = std::min(count, t0 + per_part);
        for (std::size_t f = 0; f < fields.size(); ++f) {
          const FieldCopy& field = fields[f];
          if (field.bytes == 0) continue;
          std::byte* out = windows[f]->data() + t0 * field.bytes;
          const std::byte* in = records + t0 * stride + field.record_offset;
          for (std::int64_t t = t0; t < t1; ++t, out += field.bytes, in += stride)
            std::memcpy(out, in, static_cast<std::size_t>(field.bytes));
        }
        return 0;
      });
    }
    int unmap_error = 0;
    for (auto& w : windows)
      if (w != nullptr && unmap_error == 0) unmap_error = w->unmap();
    if (error != 0) cannot_write(shown_, fields.front().file_offset, fields.front().bytes * count, error);
    if (unmap_error != 0) throw OutputError(shown_ + ": munmap failed: " + std::strerror(unmap_error));
    return true;
  }

  // The mutex is held: the staging path of FileWriter::write_fields, through pwrite.
  void unlocked_staged_write(const std::byte* records, std::int64_t count, std::int64_t stride,
                             const std::vector<FieldCopy>& fields) {
    struct Pwrite final : FileWriter {
      Pwrite(int fd, const std::string& shown) : fd_(fd), shown_(shown) {}
      void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
        write_fully(fd_, offset, source, bytes, shown_);
      }
      void sync_and_close() override {}
      int fd_;
      const std::string& shown_;
    } plain(fd_, shown_);
    plain.FileWriter::write_fields(records, count, stride, fields);
  }

  // A preparing thread: bytes [skip, skip + share) of the ranges said ahead, taken in order,
  // 32 MiB at a time, past whatever the writes have covered. Its errors are left to the writes,
  // which meet them (a full tmpfs) and report them.
  void run_ahead(std::int64_t skip, std::int64_t share) {
    std::int64_t passed = 0;
    for (const auto& f : frontiers_) {
      const std::int64_t size = f->end - f->begin;
      const std::int64_t lo = std::max<std::int64_t>(0, skip - passed), hi = std::min(size, skip + share - passed);
      passed += size;
      for (std::int64_t at = f->begin + lo; at < f->begin + hi && !stopping_.load(std::memory_order_relaxed);) {
        const std::int64_t start = std::max(at, f->written.load(std::memory_order_relaxed));
        const std::int64_t end = std::min(f->begin + hi, round_down(start, kHugeBytes) + kAheadStepBytes);
        if (end <= start) {
          at = std::max(at + 1, start);
          continue;
        }
        Window window(fd_, start, end - start);
        if (!window.valid() || prepare_range(window.data(), start, end, huge_, &counts_) != 0) return;
        at = end;
      }
    }
  }

  void stop_ahead() {
    stopping_.store(true);
    for (std::thread& t : ahead_) t.join();
    ahead_.clear();
  }

  std::string shown_;
  int fd_ = -1;
  std::int64_t size_ = 0;
  bool tmpfs_ = false;
  bool huge_ = false;
  std::mutex mutex_;
  Team team_;
  ExtentCounts counts_;
  std::vector<std::unique_ptr<Frontier>> frontiers_;
  std::vector<std::thread> ahead_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

std::unique_ptr<FileWriter> make_mapped_writer(int fd, std::int64_t size, int threads, const std::string& shown,
                                               bool huge) {
  if (size <= 0) return nullptr;
  // Whether this file maps at all (a character device, a file system without mmap: no).
  const auto probe_length = static_cast<std::size_t>(std::min(size, page_bytes()));
  void* probe = ::mmap(nullptr, probe_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (probe == MAP_FAILED) return nullptr;
  ::munmap(probe, probe_length);
  return std::make_unique<MappedWriter>(fd, size, std::max(1, threads), shown, on_tmpfs(fd),
                                        huge && huge_folios_possible(fd));
}

}  // namespace blockmm::io
