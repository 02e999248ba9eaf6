// The mapped writer declared in mapped_writer.hpp, built of mapped_pages.hpp's parts; the
// writers' policy and the reservation are in write_policy.cpp.
//
// Two ways into the file's pages. The ranges said ahead (prepare_ahead: the rank's records) are
// written through one map of the whole file (mapped_pages.hpp's FileMap): threads of the writer
// prepare their pages from the moment the size is known, beside the compute, front first (the
// order the writes come in), 32 MiB a step, in the same page tables the writes then copy into,
// and each 2 MiB extent they prepared is marked so that a write only copies there: no map, no
// populate, no collapse, no unmap of its own. A window of the map is unmapped once its bytes are
// written. Any other write (a header, /indptr, a neighbour's tiles, a file not on tmpfs) maps
// just its own range, prepares its pages, copies and unmaps: tearing down a whole file's map of
// 4 KiB pages at the end is a serial cost after the compute (bench/NOTES.md item 10).
#include "io/mapped_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "io/field_scatter.hpp"
#include "io/mapped_pages.hpp"

namespace blockmm::io {
namespace {

using mapped::cannot_write;
using mapped::cut;
using mapped::ExtentCounts;
using mapped::FileMap;
using mapped::kHugeBytes;
using mapped::page_bytes;
using mapped::prepare_range;
using mapped::round_down;
using mapped::round_up;
using mapped::Team;
using mapped::Window;

// Writes smaller than this are one pwrite: cheaper than a map and an unmap (headers, indptr pieces).
constexpr std::int64_t kMinMappedBytes = std::int64_t{256} << 10;
// As PosixWriter: start write-back of large writes at once, so that the final fsync has little left.
constexpr std::int64_t kEarlyWritebackBytes = std::int64_t{4} << 20;
// A thread's records are split and checked this many bytes of them at a time: the check reads
// their keys from the core's cache, where the split put them.
constexpr std::int64_t kCheckedPieceBytes = std::int64_t{256} << 10;
// What scatter_records returns for records a check refused (errno values are positive).
constexpr int kRefused = -1;
// The pages prepared ahead, a step at a time (steps end on multiples of it in the file, so that no
// extent is split between two steps).
constexpr std::int64_t kAheadStepBytes = std::int64_t{32} << 20;

// A range said ahead: what the writes have covered of it (its written prefix, so that the
// preparing threads skip it) and the state of each 2 MiB extent over it. An extent's part inside
// the range is prepared once, by whoever claims it first (a preparing thread, or a write that
// got there first); a write waits out an extent claimed by another, and copies into ready ones.
struct Frontier {
  enum : unsigned char { kUnready, kClaimed, kReady };
  Frontier(std::int64_t b, std::int64_t e)
      : begin(b), end(e), written(b), first_extent(b / kHugeBytes),
        state(std::make_unique<std::atomic<unsigned char>[]>(static_cast<std::size_t>((e - 1) / kHugeBytes - first_extent + 1))) {}
  bool holds(std::int64_t offset, std::int64_t bytes) const { return offset >= begin && offset + bytes <= end; }
  std::atomic<unsigned char>& extent(std::int64_t offset) {
    return state[static_cast<std::size_t>(offset / kHugeBytes - first_extent)];
  }
  std::int64_t begin, end;
  std::atomic<std::int64_t> written;
  std::int64_t first_extent;
  std::unique_ptr<std::atomic<unsigned char>[]> state;
};

class MappedWriter final : public FileWriter {
 public:
  MappedWriter(int fd, std::int64_t size, int threads, const std::string& shown, bool tmpfs, bool huge)
      : shown_(shown), fd_(fd), size_(size), tmpfs_(tmpfs), huge_(huge), team_(threads - 1) {}
  ~MappedWriter() override {
    stop_ahead();
    map_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
    if (bytes == 0) return;
    check_inside(offset, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) throw OutputError(shown_ + ": write after the file was closed");
    const auto* in = static_cast<const std::byte*>(source);
    if (bytes < kMinMappedBytes || !(copy_prepared(offset, in, bytes) || copy_through_map(offset, in, bytes)))
      write_fully(fd_, offset, in, bytes, shown_);
    note_written(offset, bytes);
    start_writeback(offset, bytes);
  }

  bool write_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                    const std::vector<FieldCopy>& fields, const RecordCheck& check) override {
    std::int64_t total = 0;
    for (const FieldCopy& f : fields) {
      check_inside(f.file_offset, f.bytes * count);
      total += f.bytes * count;
    }
    if (total < kMinMappedBytes) return FileWriter::write_fields(records, count, stride, fields, check);  // staged pwrites
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) throw OutputError(shown_ + ": write after the file was closed");
    Outcome outcome = scatter_prepared(records, count, stride, fields, check);
    if (outcome == Outcome::unmapped) outcome = scatter_through_map(records, count, stride, fields, check);
    if (outcome == Outcome::unmapped && !unlocked_staged_write(records, count, stride, fields, check))
      outcome = Outcome::refused;
    if (outcome == Outcome::refused) return false;
    for (const FieldCopy& f : fields) {
      note_written(f.file_offset, f.bytes * count);
      start_writeback(f.file_offset, f.bytes * count);
    }
    return true;
  }

  void prepare_ahead(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, int threads) override {
    if (!tmpfs_) return;  // elsewhere the pages come from the disk: nothing to gain
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0 || map_ != nullptr) return;
    auto map = std::make_unique<FileMap>(fd_, size_);
    if (!map->valid()) return;  // no address space for it: every write maps its own range
    for (const auto& [offset, bytes] : ranges) {
      if (bytes <= 0) continue;
      check_inside(offset, bytes);
      map->expect(offset, bytes);
      frontiers_.push_back(std::make_unique<Frontier>(offset, offset + bytes));
      const std::size_t f = frontiers_.size() - 1;
      for (std::int64_t at = offset; at < offset + bytes;) {
        const std::int64_t end = std::min(offset + bytes, round_down(at, kAheadStepBytes) + kAheadStepBytes);
        steps_.push_back({f, at, end});
        at = end;
      }
    }
    map_ = std::move(map);
    // Front first: each thread takes the next step, so that the pages the writes reach next are
    // the ones being prepared (the writes come in the ranges' order).
    const std::int64_t helpers = std::min<std::int64_t>(threads, static_cast<std::int64_t>(steps_.size()));
    for (std::int64_t t = 0; t < helpers; ++t) {
      try {
        ahead_.emplace_back([this] { run_ahead(); });
      } catch (const std::system_error&) {
        break;  // fewer helpers: the writes prepare their own pages
      }
    }
  }

  void sync_and_close() override {
    stop_ahead();
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) return;
    if (map_ != nullptr) {
      const int error = map_->release();
      if (error != 0) throw OutputError(shown_ + ": munmap failed: " + std::strerror(error));
    }
    if (::fsync(fd_) != 0) throw OutputError(shown_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw OutputError(shown_ + ": close failed: " + std::strerror(errno));
  }

  std::int64_t ahead_steps() const override { return map_ != nullptr ? static_cast<std::int64_t>(steps_.size()) : 0; }

  // The step past whatever the writes have covered, in the file's map (the extents a write
  // claimed first are left to it). A step whose window the writes finished meanwhile (and
  // unmapped) is skipped.
  int prepare_step(std::int64_t s) override {
    const Step& step = steps_.at(static_cast<std::size_t>(s));
    Frontier& f = *frontiers_[step.frontier];
    const std::int64_t start = std::max(step.lo, f.written.load(std::memory_order_relaxed));
    if (start >= step.hi || map_->map(start, step.hi - start) == nullptr) return 0;
    const int error = ready(f, start, step.hi, false);
    return error != 0 && !map_->released(start) ? error : 0;
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
  struct Step {
    std::size_t frontier;
    std::int64_t lo, hi;
  };
  // What a scatter did: nothing (its ranges cannot be mapped so: the caller writes another way),
  // the copy, or nothing more once a check refused records.
  enum class Outcome { unmapped, written, refused };

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

  // The range said ahead that holds all of [offset, offset + bytes), or null.
  Frontier* frontier_holding(std::int64_t offset, std::int64_t bytes) const {
    for (const auto& f : frontiers_)
      if (f->holds(offset, bytes)) return f.get();
    return nullptr;
  }

  // Where a write of [offset, end) ends inside a 2 MiB extent that lies wholly in the file: that
  // extent's end (made huge with the write, so that the next write fills a huge folio), else end.
  std::int64_t tail_extent_end(std::int64_t end) const {
    const std::int64_t tail = round_up(end, kHugeBytes);
    return huge_ && tail <= size_ ? tail : end;
  }

  // Makes the extents over [lo, hi) of `f` ready: prepares those it claims (their parts inside
  // the range, in runs of neighbours) and, where `wait`, waits out those another thread is
  // preparing; without `wait` it leaves them to that thread. 0 or an errno (the extents it
  // claimed are then unready again).
  int ready(Frontier& f, std::int64_t lo, std::int64_t hi, bool wait) {
    for (;;) {
      bool others = false;
      std::int64_t run_lo = -1, run_hi = -1;  // the extents claimed and not yet prepared
      const auto prepare_run = [&]() -> int {
        if (run_lo < 0) return 0;
        const int error = prepare_range(map_->at(run_lo), run_lo, run_hi, huge_, &counts_);
        for (std::int64_t x = round_down(run_lo, kHugeBytes); x < run_hi; x += kHugeBytes)
          f.extent(x).store(error == 0 ? Frontier::kReady : Frontier::kUnready, std::memory_order_release);
        run_lo = -1;
        return error;
      };
      for (std::int64_t x = round_down(lo, kHugeBytes); x < hi; x += kHugeBytes) {
        std::atomic<unsigned char>& state = f.extent(x);
        unsigned char seen = state.load(std::memory_order_acquire);
        if (seen == Frontier::kUnready && state.compare_exchange_strong(seen, Frontier::kClaimed, std::memory_order_acq_rel)) {
          if (run_lo < 0) run_lo = std::max(x, f.begin);
          run_hi = std::min(x + kHugeBytes, f.end);
          continue;
        }
        if (const int error = prepare_run()) return error;
        others = others || seen != Frontier::kReady;
      }
      if (const int error = prepare_run()) return error;
      if (!others || !wait) return 0;
      std::this_thread::yield();  // another thread is preparing an extent of ours: look again
    }
  }

  // ready(), waiting, and then the pages of [lo, hi) faulted in once more: a file shrunk under
  // the map since they were prepared (truncated by another process) is an error code here,
  // never a SIGBUS in the copy. Where they are still there (always, but for such a file), this
  // is a walk of the page tables the preparing thread filled.
  int ready_and_present(Frontier& f, std::int64_t lo, std::int64_t hi) {
    if (const int error = ready(f, lo, hi, true)) return error;
    return prepare_range(map_->at(lo), lo, hi, false, nullptr);
  }

  void count_written(std::int64_t offset, std::int64_t bytes) {
    const int error = map_->written(offset, bytes);
    if (error != 0) throw OutputError(shown_ + ": munmap failed: " + std::strerror(error));
  }

  // Through the file's map, where the range was said ahead; false where it was not (or cannot be
  // mapped): the caller maps it on its own.
  bool copy_prepared(std::int64_t offset, const std::byte* source, std::int64_t bytes) {
    Frontier* f = map_ != nullptr ? frontier_holding(offset, bytes) : nullptr;
    std::byte* at = f != nullptr ? map_->map(offset, bytes) : nullptr;
    if (at == nullptr) return false;
    const std::vector<std::int64_t> cuts = cut(offset, offset + bytes, team_.threads(), huge_);
    const int error = team_.run(static_cast<std::int64_t>(cuts.size()) - 1, [&](std::int64_t k) {
      const std::int64_t lo = cuts[k], hi = cuts[k + 1];
      if (const int e = ready_and_present(*f, lo, hi)) return e;
      std::memcpy(at + (lo - offset), source + (lo - offset), static_cast<std::size_t>(hi - lo));
      return 0;
    });
    if (error != 0) cannot_write(shown_, offset, bytes, error);
    count_written(offset, bytes);
    return true;
  }

  // False where this range cannot be mapped (an address-space limit, say): the caller pwrites it.
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

  // The records split among the team, each thread copying every field of its records to `out`
  // (each field's destination for record 0), a cache-sized piece at a time, each piece's keys
  // checked as it is split. 0, an errno, or kRefused.
  int scatter_records(const std::byte* records, std::int64_t count, std::int64_t stride,
                      const std::vector<FieldCopy>& fields, const std::vector<std::byte*>& out, const RecordCheck& check) {
    const std::int64_t per_part = std::max<std::int64_t>(1, (count + team_.threads() - 1) / team_.threads());
    const std::int64_t parts = (count + per_part - 1) / per_part;
    const std::int64_t per_piece = std::min(per_part, std::max<std::int64_t>(1, kCheckedPieceBytes / stride));
    // Each part's destinations and keys, allocated here: nothing on the team's threads can throw.
    std::vector<std::byte*> to(static_cast<std::size_t>(parts) * out.size());
    std::vector<std::byte> keys(check != nullptr ? static_cast<std::size_t>(parts * 8 * per_piece) : 0);
    return team_.run(parts, [&](std::int64_t k) {
      const std::int64_t t1 = std::min(count, (k + 1) * per_part);
      std::byte** mine = to.data() + k * static_cast<std::int64_t>(out.size());
      std::byte* my_keys = check != nullptr ? keys.data() + k * 8 * per_piece : nullptr;
      for (std::int64_t t = k * per_part; t < t1; t += per_piece) {
        const std::int64_t n = std::min(per_piece, t1 - t);
        for (std::size_t f = 0; f < fields.size(); ++f) mine[f] = out[f] + t * fields[f].bytes;
        scatter_fields(records + t * stride, n, stride, fields, mine, my_keys);
        if (check != nullptr && !check(t, n, my_keys)) return kRefused;
      }
      return 0;
    });
  }

  // write_fields through the file's map, where every field's range was said ahead.
  Outcome scatter_prepared(const std::byte* records, std::int64_t count, std::int64_t stride,
                           const std::vector<FieldCopy>& fields, const RecordCheck& check) {
    if (map_ == nullptr) return Outcome::unmapped;
    std::vector<Frontier*> frontier(fields.size(), nullptr);
    std::vector<std::byte*> out(fields.size(), nullptr);
    struct Piece {
      std::size_t field;
      std::int64_t lo, hi;
    };
    std::vector<Piece> pieces;  // the destinations, in parts for the team
    for (std::size_t f = 0; f < fields.size(); ++f) {
      const std::int64_t lo = fields[f].file_offset, hi = lo + fields[f].bytes * count;
      if (hi == lo) continue;
      frontier[f] = frontier_holding(lo, hi - lo);
      if (frontier[f] == nullptr || (out[f] = map_->map(lo, hi - lo)) == nullptr) return Outcome::unmapped;
      const std::vector<std::int64_t> cuts = cut(lo, hi, team_.threads(), huge_);
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k) pieces.push_back({f, cuts[k], cuts[k + 1]});
    }
    int error = team_.run(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t k) {
      const Piece& p = pieces[static_cast<std::size_t>(k)];
      return ready_and_present(*frontier[p.field], p.lo, p.hi);
    });
    if (error == 0) error = scatter_records(records, count, stride, fields, out, check);
    if (error == kRefused) return Outcome::refused;
    if (error != 0) cannot_write(shown_, fields.front().file_offset, fields.front().bytes * count, error);
    for (const FieldCopy& f : fields)
      if (f.bytes > 0) count_written(f.file_offset, f.bytes * count);
    return Outcome::written;
  }

  // The fields' destinations mapped on their own, their pages prepared by the team (extents split
  // among it), then the records split among it.
  Outcome scatter_through_map(const std::byte* records, std::int64_t count, std::int64_t stride,
                              const std::vector<FieldCopy>& fields, const RecordCheck& check) {
    std::vector<std::unique_ptr<Window>> windows;
    std::vector<std::byte*> out(fields.size(), nullptr);
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
      if (!windows.back()->valid()) return Outcome::unmapped;
      out[f] = windows.back()->data();
      const std::vector<std::int64_t> cuts = cut(fields[f].file_offset, end, team_.threads(), huge_);
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k)
        pieces.push_back({f, cuts[k], cuts[k + 1], k + 2 == cuts.size() ? tail_extent_end(end) : cuts[k + 1]});
    }
    int error = team_.run(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t k) {
      const Piece& p = pieces[static_cast<std::size_t>(k)];
      return prepare_range(out[p.field] + (p.lo - fields[p.field].file_offset), p.lo, p.hi, huge_, &counts_,
                           p.collapse_end);
    });
    if (error == 0) error = scatter_records(records, count, stride, fields, out, check);
    int unmap_error = 0;
    for (auto& w : windows)
      if (w != nullptr && unmap_error == 0) unmap_error = w->unmap();
    if (error == kRefused) return Outcome::refused;
    if (error != 0) cannot_write(shown_, fields.front().file_offset, fields.front().bytes * count, error);
    if (unmap_error != 0) throw OutputError(shown_ + ": munmap failed: " + std::strerror(unmap_error));
    return Outcome::written;
  }

  // The mutex is held: the staging path of FileWriter::write_fields, through pwrite.
  bool unlocked_staged_write(const std::byte* records, std::int64_t count, std::int64_t stride,
                             const std::vector<FieldCopy>& fields, const RecordCheck& check) {
    struct Pwrite final : FileWriter {
      Pwrite(int fd, const std::string& shown) : fd_(fd), shown_(shown) {}
      void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
        write_fully(fd_, offset, source, bytes, shown_);
      }
      void sync_and_close() override {}
      int fd_;
      const std::string& shown_;
    } plain(fd_, shown_);
    return plain.FileWriter::write_fields(records, count, stride, fields, check);
  }

  // A preparing thread: the next step not yet taken, until one fails (its error is left to the
  // writes, which meet it, a full tmpfs say, and report it).
  void run_ahead() {
    for (std::size_t s; !stopping_.load(std::memory_order_relaxed) &&
                        (s = next_step_.fetch_add(1, std::memory_order_relaxed)) < steps_.size();)
      if (prepare_step(static_cast<std::int64_t>(s)) != 0) return;
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
  std::unique_ptr<FileMap> map_;  // the ranges said ahead, and the steps that prepare them
  std::vector<std::unique_ptr<Frontier>> frontiers_;
  std::vector<Step> steps_;
  std::atomic<std::size_t> next_step_{0};
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
