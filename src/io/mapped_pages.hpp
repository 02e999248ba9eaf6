// The parts the mapped writer (mapped_writer.hpp) is made of, src/io only: maps of a file placed
// at their offsets' 2 MiB phase (so that a huge folio maps by one page-table entry), the
// preparation of their pages (huge folios on tmpfs), the split of a copy among threads and the
// team of threads that runs it, and the file's whole range reserved once, its windows mapped in
// place as the writes and the threads preparing pages ahead need them and released as they fill.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace blockmm::io::mapped {

// A PMD-sized folio: what MADV_COLLAPSE makes, and the unit maps are aligned to.
constexpr std::int64_t kHugeBytes = std::int64_t{2} << 20;

std::int64_t page_bytes();
inline std::int64_t round_down(std::int64_t value, std::int64_t unit) { return value / unit * unit; }
inline std::int64_t round_up(std::int64_t value, std::int64_t unit) { return (value + unit - 1) / unit * unit; }

// A file range [offset, offset + bytes) mapped MAP_SHARED at an address congruent to the offset
// modulo 2 MiB, so that a huge folio of the file can be mapped by one page-table entry and
// MADV_COLLAPSE accepts the range. Unmapped when destroyed.
class Window {
 public:
  Window(int fd, std::int64_t offset, std::int64_t bytes);
  ~Window() { (void)unmap(); }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool valid() const { return map_ != nullptr; }
  std::byte* data() const { return data_; }  // the byte at `offset`
  // 0, or the errno of a failed munmap.
  int unmap();

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
                  std::int64_t collapse_end = -1);

// Splits [lo, hi) into at most `parts` parts ending on page boundaries, or on 2 MiB boundaries
// where `huge` (a part then holds whole extents, which its own thread collapses). Returns the
// cut points (parts + 1 of them).
std::vector<std::int64_t> cut(std::int64_t lo, std::int64_t hi, std::int64_t parts, bool huge);

// Threads that run the parts of one job at a time; the calling thread runs parts too.
class Team {
 public:
  // Starts up to `helpers` threads; fewer where the system refuses more (the work still happens,
  // on fewer threads).
  explicit Team(int helpers);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs part(0) ... part(parts - 1), each once, on the team; returns 0 or the first errno a
  // part returned.
  int run(std::int64_t parts, const std::function<int(std::int64_t)>& part);

 private:
  void run_parts(const std::function<int(std::int64_t)>& part, std::int64_t parts);
  void work();

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

// A file's bytes [0, size) at one address range, reserved once (address space, no memory) at an
// address congruent to the offsets modulo 2 MiB: file byte X lives at base() + X. Windows of
// kWindowBytes are mapped (MAP_SHARED) into their place when first asked for and stay mapped, so
// that the threads preparing pages ahead and the writes share their page tables (a write then
// copies into pages the preparing thread mapped, without a fault, a map or an unmap of its own).
// A window whose expected bytes (expect(), at least one) have all been written (written()) is released: its
// file pages are unmapped by mapping the range inaccessible again, so the reservation stays whole
// and nothing else of the process is ever mapped inside it. Thread-safe.
class FileMap {
 public:
  static constexpr std::int64_t kWindowBytes = std::int64_t{64} << 20;
  // `window_bytes`: a multiple of 2 MiB (smaller ones for tests).
  FileMap(int fd, std::int64_t size, std::int64_t window_bytes = kWindowBytes);
  ~FileMap() { (void)release(); }
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  bool valid() const { return base_ != nullptr; }
  // Bytes [offset, offset + bytes) will be written, each once (before any write).
  void expect(std::int64_t offset, std::int64_t bytes);
  // The address of file byte `offset` with the windows over [offset, offset + bytes) mapped, or
  // null where one cannot be mapped or was released.
  std::byte* map(std::int64_t offset, std::int64_t bytes);
  // The address of file byte `offset`, whose window map() mapped.
  std::byte* at(std::int64_t offset) const { return base_ + offset; }
  // Counts [offset, offset + bytes) written; releases the windows this completes. 0 or the errno
  // of a failed release.
  int written(std::int64_t offset, std::int64_t bytes);
  // Whether the window holding `offset` was released (its bytes all written).
  bool released(std::int64_t offset);
  // Unmaps everything; 0 or munmap's errno.
  int release();

 private:
  enum class State : unsigned char { reserved, mapped, released };
  struct Slot {
    std::int64_t expected = 0;
    std::int64_t written = 0;
    State state = State::reserved;
  };
  std::size_t slot_of(std::int64_t offset) const { return static_cast<std::size_t>(offset / window_); }

  int fd_;
  std::int64_t size_;
  std::int64_t window_;
  void* area_ = nullptr;
  std::size_t reserved_ = 0;
  std::byte* base_ = nullptr;
  std::mutex mutex_;
  std::vector<Slot> slots_;
};

// Throws the OutputError of a copy into [offset, offset + bytes) of `shown` that met `error`.
[[noreturn]] void cannot_write(const std::string& shown, std::int64_t offset, std::int64_t bytes, int error);

}  // namespace blockmm::io::mapped
