// The output's write floor, without blockmm: BYTES written by W writer threads either into ONE
// file (each writer its contiguous share) or into W separate files, by one of several methods,
// so that the per-file limit of the page cache can be told from the machine's (bench/NOTES.md
// item 30). Every writer copies from a source buffer of its own (filled before the clock), in
// pieces of --piece bytes, as blockmm's writers copy its chunks; the file is fsync'd and closed
// inside the clock and unlinked after it.
//
//   write_floor DIR BYTES [--writers W] [--files one|separate] [--method M] [--piece BYTES] [--repeat R]
//               [--processes]
//
// --processes: the writers are processes (forked), not threads of one, as the issue measured.
// Methods: map (ftruncate; each piece mapped MAP_SHARED, MADV_POPULATE_WRITE, memcpy, munmap: the
// writer blockmm had), collapse (the same, but each 2 MiB of the piece is first made one huge
// folio: one byte written into it, then MADV_COLLAPSE, Linux 6.1), hugepage (MADV_HUGEPAGE on the
// map before populating: huge folios only where tmpfs allows them), fallocate (fallocate first,
// then map), pwrite (pwrite(2) of each piece). Prints one line a repeat: seconds and GB/s, and
// the tmpfs huge-page settings in effect for DIR.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/madvise_advice.hpp"  // the advice values only: nothing of blockmm's code is linked

namespace {

constexpr std::int64_t kHuge = std::int64_t{2} << 20;

std::int64_t parse_bytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  switch (*end) {
    case 'K': case 'k': value *= 1024.0; break;
    case 'M': case 'm': value *= 1024.0 * 1024; break;
    case 'G': case 'g': value *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<std::int64_t>(value);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "write_floor: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "-" : line;
}

// The mount's huge= option of the file system holding `dir` (tmpfs), from /proc/self/mounts.
std::string mount_huge_option(const std::string& dir) {
  struct stat want {};
  if (::stat(dir.c_str(), &want) != 0) return "-";
  std::ifstream mounts("/proc/self/mounts");
  std::string device, point, type, options, rest, found = "-";
  while (mounts >> device >> point >> type >> options && std::getline(mounts, rest)) {
    struct stat st {};
    if (type != "tmpfs" || ::stat(point.c_str(), &st) != 0 || st.st_dev != want.st_dev) continue;
    found = "never";
    for (std::size_t at = 0; at != std::string::npos;) {
      const std::size_t comma = options.find(',', at);
      const std::string option = options.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (option.rfind("huge=", 0) == 0) found = option.substr(5);
      at = comma == std::string::npos ? comma : comma + 1;
    }
  }
  return found;
}

struct Settings {
  std::string dir;
  std::int64_t bytes = 0;
  int writers = 1;
  bool separate = false;
  std::string method = "map";
  std::int64_t piece = std::int64_t{64} << 20;
  bool processes = false;
};

// Writes [begin, end) of fd from `source` (cycled), piece by piece.
void write_range(const Settings& s, int fd, std::int64_t begin, std::int64_t end, const std::vector<char>& source,
                 std::atomic<int>& failures, double& prepare_seconds) {
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  for (std::int64_t at = begin; at < end;) {
    const std::int64_t bytes = std::min(s.piece, end - at);
    if (s.method == "pwrite") {
      for (std::int64_t done = 0; done < bytes;) {
        const ssize_t put = ::pwrite(fd, source.data() + done % static_cast<std::int64_t>(source.size()),
                                     static_cast<std::size_t>(std::min<std::int64_t>(bytes - done, source.size())), at + done);
        if (put <= 0) { ++failures; return; }
        done += put;
      }
      at += bytes;
      continue;
    }
    const std::int64_t first = at / page * page;
    const auto length = static_cast<std::size_t>(at + bytes - first);
    // A 2 MiB-aligned address for a 2 MiB-aligned file offset: what a PMD mapping needs.
    void* area = ::mmap(nullptr, length + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) { ++failures; return; }
    const auto base = reinterpret_cast<std::uintptr_t>(area);
    const std::uintptr_t aligned = (base + kHuge - 1) / kHuge * kHuge + static_cast<std::uintptr_t>(first % kHuge);
    auto* map = static_cast<char*>(::mmap(reinterpret_cast<void*>(aligned), length, PROT_READ | PROT_WRITE,
                                          MAP_SHARED | MAP_FIXED, fd, first));
    if (map == MAP_FAILED) { ++failures; ::munmap(area, length + kHuge); return; }
    const auto prepare = std::chrono::steady_clock::now();
    if (s.method == "hugepage") (void)::madvise(map, length, MADV_HUGEPAGE);
    if (s.method == "collapse") {
      // One page present in each whole 2 MiB extent, then the extent collapsed into a huge folio
      // (MADV_COLLAPSE refuses an extent with no page at all).
      // One call for the piece: each call drains every CPU's LRU batches first (lru_add_drain_all).
      const std::int64_t h0 = (first + kHuge - 1) / kHuge * kHuge;
      std::int64_t h = h0;
      for (; h + kHuge <= first + static_cast<std::int64_t>(length); h += kHuge) {
        volatile char* p = map + (h - first);
        *p = 0;
      }
      if (h > h0) (void)::madvise(map + (h0 - first), static_cast<std::size_t>(h - h0), MADV_COLLAPSE);
    }
    if (::madvise(map, length, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) ++failures;
    prepare_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - prepare).count();
    for (std::int64_t done = 0; done < bytes;) {
      const std::int64_t c = std::min<std::int64_t>(bytes - done, source.size());
      std::memcpy(map + (at - first) + done, source.data(), static_cast<std::size_t>(c));
      done += c;
    }
    ::munmap(area, length + kHuge);  // the file's map with it
    at += bytes;
  }
}

struct Timing {
  double seconds = 0;
  double prepare = 0;  // the slowest writer's mapping, collapsing and populating (not the copies)
};

Timing run_once(const Settings& s) {
  std::vector<std::vector<char>> sources(static_cast<std::size_t>(s.writers));
  for (int w = 0; w < s.writers; ++w) {
    sources[w].resize(static_cast<std::size_t>(std::min<std::int64_t>(s.piece, std::int64_t{16} << 20)));
    for (std::size_t b = 0; b < sources[w].size(); ++b) sources[w][b] = static_cast<char>((b * 2654435761u) >> 13 | 1);
  }
  const int files = s.separate ? s.writers : 1;
  std::vector<std::string> names;
  std::vector<int> fds;
  for (int f = 0; f < files; ++f) {
    names.push_back(s.dir + "/write_floor." + std::to_string(::getpid()) + "." + std::to_string(f));
    const int fd = ::open(names.back().c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot create " + names.back());
    fds.push_back(fd);
  }
  std::atomic<int> failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t share = (s.bytes / s.writers + kHuge - 1) / kHuge * kHuge;
  // Each file sized (or reserved) first, as blockmm's writer does at begin().
  for (int f = 0; f < files; ++f) {
    const std::int64_t size = s.separate ? std::min(s.bytes, (f + 1) * share) - std::min(s.bytes, f * share) : s.bytes;
    if (s.method == "fallocate" ? ::fallocate(fds[f], 0, 0, size) != 0
                                : s.method != "pwrite" && ::ftruncate(fds[f], size) != 0)
      ++failures;
  }
  std::vector<std::thread> threads;
  std::vector<double> prepare(static_cast<std::size_t>(s.writers), 0.0);
  const auto writer = [&](int w) {
    const std::int64_t begin = std::min(s.bytes, w * share), end = std::min(s.bytes, (w + 1) * share);
    if (s.separate)
      write_range(s, fds[w], 0, end - begin, sources[w], failures, prepare[w]);
    else
      write_range(s, fds[0], begin, end, sources[w], failures, prepare[w]);
  };
  if (s.processes) {
    std::vector<pid_t> children;
    for (int w = 0; w < s.writers; ++w) {
      const pid_t pid = ::fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        writer(w);
        ::_exit(failures.load() == 0 ? 0 : 1);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
  } else {
    for (int w = 0; w < s.writers; ++w) threads.emplace_back(writer, w);
    for (std::thread& t : threads) t.join();
  }
  for (int fd : fds) {
    if (::fsync(fd) != 0) ++failures;
    ::close(fd);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& name : names) ::unlink(name.c_str());
  if (failures.load() != 0) {
    std::fprintf(stderr, "write_floor: %d writes failed (full file system?)\n", failures.load());
    std::exit(1);
  }
  return {seconds, *std::max_element(prepare.begin(), prepare.end())};
}

int usage() {
  std::fprintf(stderr,
               "usage: write_floor DIR BYTES [--writers W] [--files one|separate] "
               "[--method map|collapse|hugepage|fallocate|pwrite] [--piece BYTES] [--repeat R]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  Settings s;
  s.dir = argv[1];
  s.bytes = parse_bytes(argv[2]);
  int repeat = 3;
  for (int a = 3; a < argc; ++a) {
    const std::string option = argv[a];
    if (option == "--processes") {
      s.processes = true;
      continue;
    }
    if (a + 1 >= argc) return usage();
    const char* value = argv[++a];
    if (option == "--writers") s.writers = std::atoi(value);
    else if (option == "--files") s.separate = std::string(value) == "separate";
    else if (option == "--method") s.method = value;
    else if (option == "--piece") s.piece = parse_bytes(value);
    else if (option == "--repeat") repeat = std::atoi(value);
    else return usage();
  }
  const std::vector<std::string> methods = {"map", "collapse", "hugepage", "fallocate", "pwrite"};
  if (s.bytes <= 0 || s.writers < 1 || s.writers > 256 || s.piece < kHuge || repeat < 1 ||
      std::find(methods.begin(), methods.end(), s.method) == methods.end())
    return usage();
  struct statfs fs {};
  const bool tmpfs = ::statfs(s.dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  std::string enabled = first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  if (enabled.find('[') != std::string::npos)  // "always within_size advise [never] deny force": the chosen one
    enabled = enabled.substr(enabled.find('[') + 1, enabled.find(']') - enabled.find('[') - 1);
  const std::string huge = tmpfs ? "shmem_enabled=" + enabled + " huge=" + mount_huge_option(s.dir) : "not tmpfs";
  for (int r = 0; r < repeat; ++r) {
    const Timing t = run_once(s);
    std::printf("write_floor %s files=%s writers=%d%s method=%s piece=%lld bytes=%lld seconds=%.3f GB/s=%.2f prepare=%.3f (%s)\n",
                s.dir.c_str(), s.separate ? "separate" : "one", s.writers, s.processes ? "p" : "", s.method.c_str(),
                static_cast<long long>(s.piece), static_cast<long long>(s.bytes), t.seconds,
                static_cast<double>(s.bytes) / t.seconds / 1e9, t.prepare, huge.c_str());
    std::fflush(stdout);
  }
  return 0;
}
