// The writers' policy and the output's reservation (mapped_writer.hpp): which writer a rank
// uses, read once from the environment, whether huge folios can be had, and the storage set
// aside before the numeric phase.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/madvise_advice.hpp"
#include "io/mapped_writer.hpp"

namespace blockmm::io {
namespace {

constexpr int kDefaultWriteThreads = 8;

// Whether the kernel knows `advice` (an empty range at an aligned address: 0 where it does, EINVAL where not).
bool advice_known(int advice) {
  const long page = ::sysconf(_SC_PAGESIZE);
  return ::madvise(reinterpret_cast<void*>(page > 0 ? page : 4096), 0, advice) == 0;
}

// The text of the first line of a small system file, or "" where it cannot be read.
std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The bracketed choice of a sysfs setting ("always within_size advise [never] deny force" -> "never").
std::string chosen(const std::string& line) {
  const std::size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close != std::string::npos && close > open ? line.substr(open + 1, close - open - 1)
                                                                               : line;
}

}  // namespace

WritePolicy write_policy(int requested_threads, bool huge, bool pwrite_only, bool tmpfs_fallocate, int rank_threads) {
  WritePolicy policy;
  policy.threads = requested_threads > 0 ? std::min(requested_threads, kMaxWriteThreads)
                                         : std::clamp(rank_threads, 1, kDefaultWriteThreads);
  policy.threads_forced = requested_threads > 0;
  policy.huge = huge;
  policy.pwrite_only = pwrite_only;
  policy.tmpfs_fallocate = tmpfs_fallocate;
  return policy;
}

bool huge_folios_possible(int fd) {
  static const bool collapse = advice_known(MADV_COLLAPSE) && populate_reports_errors();
  return collapse && on_tmpfs(fd) && chosen(first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled")) != "deny";
}

bool maps_output(const MapChoice& c) {
  if (c.pwrite_forced || !c.mappable) return false;
  if (c.threads_forced) return true;
  // The local disk: one pwrite stream is faster (the map adds page-table work and a flush that
  // pwrite does not). Fewer threads: too few copies to outrun one pwrite stream, in 4 KiB pages
  // and in huge folios alike (on a virtual machine a huge folio's first allocation may also wait
  // for the host to back each 2 MiB anew).
  if (!c.tmpfs || c.threads < kMinDefaultMapThreads) return false;
  return c.huge || !c.hdf5;  // HDF5 through 4 KiB pages of a map loses to pwrite even on many threads
}

std::string tmpfs_huge_settings(int fd) {
  if (!on_tmpfs(fd)) return "";
  std::string text = "shmem_enabled=" + chosen(first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
  // The mount's huge= option: the tmpfs of this descriptor in /proc/self/mounts (by device number).
  struct stat mine {};
  std::string huge = "?";
  if (::fstat(fd, &mine) == 0) {
    std::ifstream mounts("/proc/self/mounts");
    std::string device, point, type, options, rest;
    while (mounts >> device >> point >> type >> options && std::getline(mounts, rest)) {
      struct stat st {};
      if (type != "tmpfs" || ::stat(point.c_str(), &st) != 0 || st.st_dev != mine.st_dev) continue;
      huge = "never";
      for (std::size_t at = 0; at != std::string::npos;) {
        const std::size_t comma = options.find(',', at);
        const std::string option = options.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (option.rfind("huge=", 0) == 0) huge = option.substr(5);
        at = comma == std::string::npos ? comma : comma + 1;
      }
    }
  }
  return text + " huge=" + huge;
}

bool populate_reports_errors() {
  static const bool known = advice_known(MADV_POPULATE_WRITE);
  return known;
}

namespace {

[[noreturn]] void cannot_reserve(std::int64_t bytes, const std::string& shown, const std::string& temporary, int error) {
  throw OutputError(shown + ": cannot reserve " + std::to_string(bytes) + " bytes for the temporary file " + temporary +
                    ": " + std::strerror(error));
}

// tmpfs: fallocate allocates every page, in one thread under the inode's lock (a serial pass
// over the whole output before the numeric phase), and the map's first touch clears it again.
// The copying threads' MADV_POPULATE_WRITE allocates the same pages in parallel and reports a
// full tmpfs as an error, so here the size is set (a file-size limit fails now) and the free
// space checked now; a tmpfs filled by someone else meanwhile fails the write that finds it.
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

}  // namespace blockmm::io
