#include "io/atomic_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fs.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <random>

#include "core/error.hpp"
#include "io/cleanup_watcher.hpp"
#include "io/mapped_writer.hpp"
#include "io/output_parts.hpp"
#include "io/path_names.hpp"
#include "io/same_file.hpp"
#include "io/stale_temporaries.hpp"

namespace blockmm::io {
namespace {

// The temporary files a signal handler must remove: the product, the stats file and the part
// files of a parted output (every rank registers every part, so that the ranks a launcher ends
// with SIGTERM also remove the parts of a rank that was SIGKILLed). Paths live in one arena,
// flags say which are armed: the handler may only use async-signal-safe calls. The first
// kWatchedSlots slots are also given to the cleanup watcher (the product's and the stats file's
// temporaries are armed first); parts past them are left to the next run's sweep if the whole
// process group is SIGKILLed.
constexpr int kCleanupSlots = 4 + kMaxOutputParts;
constexpr std::size_t kCleanupBytes = std::size_t{1} << 20;
char g_cleanup_text[kCleanupBytes];
std::size_t g_cleanup_at[kCleanupSlots];
volatile std::sig_atomic_t g_cleanup_armed[kCleanupSlots] = {};
std::size_t g_cleanup_used = 0;  // arena bytes in use; outside handlers only, under the mutex
std::mutex g_cleanup_mutex;

void remove_registered() noexcept {
  for (int s = 0; s < kCleanupSlots; ++s)
    if (g_cleanup_armed[s]) ::unlink(g_cleanup_text + g_cleanup_at[s]);
}

extern "C" void remove_temporary_and_reraise(int signal_number) {
  remove_registered();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

int arm_temporary_cleanup(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_cleanup_mutex);
  bool any_armed = false;
  for (int s = 0; s < kCleanupSlots && !any_armed; ++s) any_armed = g_cleanup_armed[s] != 0;
  if (!any_armed) g_cleanup_used = 0;  // nothing registered: the arena starts over
  if (path.size() + 1 > kCleanupBytes - g_cleanup_used) return -1;
  for (int s = 0; s < kCleanupSlots; ++s) {
    if (g_cleanup_armed[s]) continue;
    std::memcpy(g_cleanup_text + g_cleanup_used, path.c_str(), path.size() + 1);
    g_cleanup_at[s] = g_cleanup_used;
    g_cleanup_used += path.size() + 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the path is whole before the flag says so
    g_cleanup_armed[s] = 1;
    return s;
  }
  return -1;
}

void disarm_temporary_cleanup(int slot) {
  std::lock_guard<std::mutex> lock(g_cleanup_mutex);
  if (slot >= 0 && slot < kCleanupSlots) g_cleanup_armed[slot] = 0;
}

namespace {

// Returns the slot, or -1 when none is free or the arena is full (the file is then only removed
// by the next run's stale-file sweep).
int arm_cleanup(const std::string& path) { return arm_temporary_cleanup(path); }
void disarm_cleanup(int slot) { disarm_temporary_cleanup(slot); }

std::string errno_text(int error) { return std::strerror(error); }

// Why `target` cannot be an output that is renamed into place, or "" where it can: a pipe or a
// socket (nothing can be renamed into one, and what read it would wait for ever), or a link that
// leads into /proc, where /dev/stdout, /dev/stderr and /dev/fd/N lead (renaming over it would
// replace the system's /dev/stdout, for root, with the product). Character devices are written
// in place before this is asked.
std::string unusable_output(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return "is a pipe or socket; blockmm writes its output into a file it renames into place (a character device "
           "such as /dev/null is written in place)";
  if (const std::string link = descriptor_link(target); !link.empty())
    return "is a link to an open descriptor (" + link + "), as /dev/stdout is; blockmm renames a finished file into "
           "place and cannot write into a descriptor: name the file itself";
  return "";
}

// This host's short name, reduced to [A-Za-z0-9_-] (it becomes part of a file name).
std::string host_tag() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string tag;
  for (const char* c = name; *c != '\0' && *c != '.' && tag.size() < kTemporaryHostChars; ++c) {
    const bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-';
    tag += plain ? *c : '_';
  }
  return tag.empty() ? "localhost" : tag;
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// "." + base + ".blockmm-tmp." + ["lk."] + host + "." (path_names.hpp): the base shortened, with a
// hash of the whole, when the temporary name would pass NAME_MAX (so that output names up to
// NAME_MAX bytes work).
std::string name_prefix(const std::string& base, const std::string& host, bool locked) {
  const std::size_t fixed = kTemporaryNameExtra + host.size();
  std::string shown = base;
  if (fixed + base.size() > NAME_MAX) {
    char hash[20];
    std::snprintf(hash, sizeof hash, "~%016llx", static_cast<unsigned long long>(fnv1a(base)));
    const std::size_t keep = NAME_MAX - fixed - (sizeof hash - 3);  // 17 characters of "~" + hash
    shown = base.substr(0, keep) + hash;
  }
  return "." + shown + kTemporaryMarker + (locked ? kLockedTemporaryFlag : "") + host + ".";
}

bool same_file(const struct stat& a, std::uint64_t device, std::uint64_t inode) {
  return static_cast<std::uint64_t>(a.st_dev) == device && static_cast<std::uint64_t>(a.st_ino) == inode;
}

std::string random_suffix() {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::string text;
  for (std::size_t c = 0; c < kTemporaryRandomChars; ++c) text += alphabet[device() % (sizeof alphabet - 1)];
  return text;
}

// Whether the existing target may not be replaced: a regular file nobody may write (whatever
// root's access(2) says) or that this user may not write.
bool is_read_only(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return (st.st_mode & 0222) == 0 || ::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0;
}

}  // namespace

std::string temporary_host_tag() { return host_tag(); }

std::string temporary_prefix(const std::string& target, const std::string& host, long pid, bool locked) {
  return directory_of(target) + "/" + name_prefix(base_name(target), host, locked) + std::to_string(pid) + ".";
}

CreatedTemporary create_temporary(const std::string& target, const std::string& host, long pid,
                                  bool (*take_lock)(int)) {
  const std::string dir = directory_of(target);
  CreatedTemporary made;
  // The marked name first; where its lock cannot be taken (a file system without locks, or one
  // that refuses them for now: ENOLCK on NFS), the empty file goes and the unmarked name is made,
  // which no sweep removes: a marked file without its lock would be taken for a dead run's.
  for (const bool locked : {true, false}) {
    const std::string prefix = temporary_prefix(target, host, pid, locked);
    for (int attempt = 0; made.fd < 0; ++attempt) {
      made.path = prefix + random_suffix();
      made.cleanup_slot = arm_temporary_cleanup(made.path);  // (a name with this pid: no other live run's)
      // The kernel applies the umask (and default ACLs) as for any new file: no process-wide umask() call.
      made.fd = ::open(made.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (made.fd < 0) {
        const int error = errno;
        disarm_temporary_cleanup(made.cleanup_slot);
        made.cleanup_slot = -1;
        if (error != EEXIST || attempt >= 100)
          throw OutputError(target + ": cannot create a temporary file in " + dir + ": " + errno_text(error));
      }
    }
    if (!locked || take_lock(made.fd)) {
      made.locked = locked;
      return made;
    }
    ::unlink(made.path.c_str());
    ::close(made.fd);
    disarm_temporary_cleanup(made.cleanup_slot);
    made.cleanup_slot = -1;
    made.fd = -1;
  }
  return made;  // not reached: the unmarked name is returned above
}

void remove_temporary_from_signal_handler() noexcept { remove_registered(); }

void install_cleanup_handlers() {
  // SIGPIPE too: a process whose stdout or stderr has no reader left (a launcher that is gone, a
  // pipe closed early) dies by it at its next write there. A signal ignored when blockmm starts
  // stays ignored: `nohup blockmm ... &` must survive the logout's SIGHUP, and a shell's
  // background job its terminal's Ctrl-C, as any program's would. (Not SIGPIPE: a parent that
  // ignores it, as Python does, passes that on by accident, and an orphaned rank must still end.)
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    struct sigaction current {};
    if (s != SIGPIPE && ::sigaction(s, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporary_and_reraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(s, &action, nullptr);
  }
  // Past a file-size limit a write fails with EFBIG (reported, exit 4, temporary removed) instead
  // of the process dying silently with a partial temporary file.
  std::signal(SIGXFSZ, SIG_IGN);
  // What no handler here can catch (SIGKILL of this process, an _exit inside Open MPI once its
  // launcher is gone) is left to a watcher process (cleanup_watcher.hpp).
  start_cleanup_watcher();
}

static bool is_character_device(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

AtomicOutput::AtomicOutput(const std::string& target, const comm::Communicator& comm) : comm_(comm), target_(target) {
  if (is_character_device(target)) {
    in_place_ = true;
    temporary_ = target;
    return;
  }
  std::string identity;
  try {
    comm.run_phase([&] {
      if (!comm.is_root()) return;
      if (target.empty() || target.back() == '/') throw UsageError("output path '" + target + "' names no file");
      struct stat st {};
      if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw OutputError(target + ": is a directory");
      if (const std::string why = unusable_output(target); !why.empty()) throw OutputError(target + ": " + why);
      if (is_read_only(target))
        throw OutputError(target + ": the existing output is read-only; blockmm does not replace it (make it writable "
                                   "or remove it first)");
      const std::string dir = directory_of(target);
      const std::string host = host_tag();
      remove_stale_temporaries(dir, host);
      // Its liveness lock, held with fd_ until the rename, keeps other runs' sweeps off it (stale_temporaries.hpp).
      const CreatedTemporary created = create_temporary(target, host, static_cast<long>(::getpid()));
      fd_ = created.fd;
      temporary_ = created.path;
      cleanup_slot_ = created.cleanup_slot;  // armed before it existed: no signal can leave it behind
      struct stat made {};
      if (::fstat(fd_, &made) != 0)
        throw OutputError(target + ": cannot stat the temporary file " + temporary_ + ": " + errno_text(errno));
      created_mode_ = made.st_mode & 07777;
      device_ = static_cast<std::uint64_t>(made.st_dev);
      inode_ = static_cast<std::uint64_t>(made.st_ino);
      watch_temporary(cleanup_slot_, temporary_.c_str(), inode_);
      // Private while partial; the final permissions are set at commit. Ranks run as one user.
      if (::fchmod(fd_, 0600) != 0)
        throw OutputError(target + ": cannot prepare the temporary file " + temporary_ + ": " + errno_text(errno));
      identity = std::to_string(device_) + " " + std::to_string(inode_);
      tmpfs_settings_ = io::tmpfs_huge_settings(fd_);
    });
    comm.broadcast(temporary_, 0);
    comm.broadcast(identity, 0);
    comm.broadcast(tmpfs_settings_, 0);
  } catch (...) {
    abandon();  // no destructor runs for a constructor that throws
    throw;
  }
  if (!comm.is_root()) {
    char* end = nullptr;
    device_ = std::strtoull(identity.c_str(), &end, 10);
    inode_ = std::strtoull(end, nullptr, 10);
    cleanup_slot_ = arm_cleanup(temporary_);
    watch_temporary(cleanup_slot_, temporary_.c_str(), inode_);
  }
}

AtomicOutput::~AtomicOutput() { abandon(); }

std::string AtomicOutput::path_for_library() const {
  if (in_place_ || fd_ < 0) return temporary_;
  const std::string through_descriptor = "/proc/self/fd/" + std::to_string(fd_);
  struct stat st {};
  if (::stat(through_descriptor.c_str(), &st) == 0 && same_file(st, device_, inode_)) return through_descriptor;
  return temporary_;  // no /proc: the commit check below still catches a swapped name
}

std::unique_ptr<FileWriter> AtomicOutput::open_writer() const {
  if (in_place_) return io::open_writer(temporary_, target_, comm_);
  return open_temporary_writer(temporary_, target_, comm_, fd_, device_, inode_);
}

std::unique_ptr<FileWriter> AtomicOutput::open_writer(std::int64_t bytes, const WritePolicy& policy, bool hdf5) const {
  if (in_place_ || writes_through_mpi_io(comm_) || policy.pwrite_only) {
    std::unique_ptr<FileWriter> writer;
    comm_.run_phase([&] { writer = open_writer(); });
    return writer;
  }
  // Rank 0 reserves (the file may already hold more: HDF5's metadata), every rank learns how much.
  std::string reserved = "0";
  comm_.run_phase([&] {
    if (!comm_.is_root() || !will_map(fd_, policy, hdf5)) return;
    struct stat st {};
    if (::fstat(fd_, &st) != 0)
      throw OutputError(target_ + ": cannot stat the temporary file " + temporary_ + ": " + errno_text(errno));
    const std::int64_t size = std::max<std::int64_t>(bytes, st.st_size);
    if (reserve_file_space(fd_, size, target_, temporary_, policy.tmpfs_fallocate)) reserved = std::to_string(size);
  });
  comm_.broadcast(reserved, 0);
  const std::int64_t map_bytes = std::strtoll(reserved.c_str(), nullptr, 10);
  std::unique_ptr<FileWriter> writer;
  comm_.run_phase([&] {
    writer = open_temporary_writer(temporary_, target_, comm_, fd_, device_, inode_, map_bytes, policy, hdf5);
  });
  return writer;
}

void AtomicOutput::check_not_replaced() const {
  if (in_place_ || fd_ < 0) return;  // rank 0 knows the file by its descriptor; other nodes may see another device
  struct stat named {};
  if (::lstat(temporary_.c_str(), &named) != 0 || !S_ISREG(named.st_mode) || !same_file(named, device_, inode_))
    throw OutputError(target_ + ": the temporary file " + temporary_ +
                      " was replaced or removed by someone else while blockmm ran; the output was not written");
}

void AtomicOutput::reserve(std::int64_t bytes) const {
  if (in_place_ || fd_ < 0) return;
  const int error = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
  if (error != 0 && error != EOPNOTSUPP && error != EINVAL)
    throw OutputError(target_ + ": cannot reserve " + std::to_string(bytes) + " bytes for " + temporary_ + ": " +
                      errno_text(error));
}

void AtomicOutput::set_size(std::int64_t bytes) const {
  if (in_place_ || fd_ < 0) return;
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    throw OutputError(target_ + ": cannot set the size of " + temporary_ + ": " + errno_text(errno));
}

void AtomicOutput::commit() { commit(CommitOptions{}); }

unsigned AtomicOutput::final_mode() const {
  // Never change an existing output's permissions: the new file takes the old one's.
  struct stat old {};
  return ::stat(target_.c_str(), &old) == 0 && S_ISREG(old.st_mode) ? (old.st_mode & 07777) : created_mode_;
}

void AtomicOutput::commit(const CommitOptions& options) {
  if (in_place_) {
    done_ = true;
    return;
  }
  comm_.barrier();  // every rank has closed the file
  comm_.run_phase([&] {
    if (!comm_.is_root()) return;
    check_not_replaced();
    const unsigned mode = options.mode >= 0 ? static_cast<unsigned>(options.mode) : final_mode();
    if (::fchmod(fd_, mode) != 0)
      throw OutputError(target_ + ": cannot set the permissions of " + temporary_ + ": " + errno_text(errno));
    // The part files of a parted output this one replaces go with it (output_parts.hpp).
    const std::vector<std::string> replaced_parts = options.replace ? parts_of_existing_output(target_)
                                                                    : std::vector<std::string>{};
    if (options.replace) {
      if (::rename(temporary_.c_str(), target_.c_str()) != 0)
        throw OutputError(target_ + ": cannot rename the temporary file " + temporary_ + " into place: " +
                          errno_text(errno));
    } else {
      rename_without_replacing();
    }
    // The rename itself must survive a crash: sync the directory entry.
    const int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    remove_replaced_parts(target_, replaced_parts, options.kept_part_generation);
  });
  done_ = true;
  disarm_cleanup(cleanup_slot_);
  unwatch_temporary(cleanup_slot_);  // after the rename: killed in between, the watcher finds the name gone
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// renameat2(RENAME_NOREPLACE) where the file system has it, else a hard link (which never
// replaces either) and the temporary name removed.
void AtomicOutput::rename_without_replacing() const {
#if defined(SYS_renameat2) && defined(RENAME_NOREPLACE)
  if (::syscall(SYS_renameat2, AT_FDCWD, temporary_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    throw OutputError(target_ + ": cannot rename the temporary file " + temporary_ + " into place: " + errno_text(errno));
#endif
  if (::link(temporary_.c_str(), target_.c_str()) != 0)
    throw OutputError(target_ + ": cannot rename the temporary file " + temporary_ + " into place: " + errno_text(errno));
  ::unlink(temporary_.c_str());
}

void AtomicOutput::abandon() noexcept {
  if (done_) return;
  done_ = true;
  if (in_place_) return;
  disarm_cleanup(cleanup_slot_);
  // Only the file this run created: a name that now holds someone else's link or file stays.
  // Every rank tries; ENOENT is fine. Other nodes may see another device number for the same file.
  struct stat named {};
  if (!temporary_.empty() && ::lstat(temporary_.c_str(), &named) == 0 && S_ISREG(named.st_mode) &&
      static_cast<std::uint64_t>(named.st_ino) == inode_)
    ::unlink(temporary_.c_str());
  unwatch_temporary(cleanup_slot_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace blockmm::io
