// The stale-temporary sweep and the liveness lock (stale_temporaries.hpp).
#include "io/stale_temporaries.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "io/path_names.hpp"

namespace blockmm::io {
namespace {

struct flock liveness_lock(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = kLivenessLockOffset;
  lock.l_len = 1;
  lock.l_pid = 0;  // F_OFD_* requires 0
  return lock;
}

// Whether `name` holds `part` ending at `end`, after at least "." and a character of the name.
bool holds_before(const std::string& name, std::size_t end, const std::string& part) {
  return end >= part.size() + 2 && name.compare(end - part.size(), part.size(), part) == 0;
}

}  // namespace

TemporaryName parse_temporary_name(const std::string& name) {
  const std::size_t marker = sizeof kTemporaryMarker - 1;
  if (name.size() < 2 + marker + 1 + 1 + 1 + 1 + kTemporaryRandomChars || name[0] != '.') return {};
  const std::size_t random_at = name.size() - kTemporaryRandomChars;
  if (name[random_at - 1] != '.') return {};
  for (std::size_t c = random_at; c < name.size(); ++c)
    if (std::isalnum(static_cast<unsigned char>(name[c])) == 0) return {};
  const std::size_t pid_end = random_at - 1;
  std::size_t pid_begin = pid_end;
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  while (pid_begin > 0 && pid_end - pid_begin < kTemporaryPidDigits && digit(name[pid_begin - 1])) --pid_begin;
  if (pid_begin == pid_end || pid_begin == 0 || name[pid_begin - 1] != '.') return {};
  const std::size_t host_end = pid_begin - 1;
  std::size_t host_begin = host_end;
  const auto host_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
  };
  while (host_begin > 0 && host_end - host_begin < kTemporaryHostChars && host_char(name[host_begin - 1]))
    --host_begin;
  if (host_begin == host_end) return {};
  TemporaryName parsed;
  // The two forms cannot be confused: one ends in "lk.", the other in "tmp.".
  const std::string locked = std::string(kTemporaryMarker) + kLockedTemporaryFlag;
  if (holds_before(name, host_begin, locked))
    parsed.locked = true;
  else if (!holds_before(name, host_begin, kTemporaryMarker))
    return {};
  parsed.host = name.substr(host_begin, host_end - host_begin);
  parsed.pid = std::strtol(name.substr(pid_begin, pid_end - pid_begin).c_str(), nullptr, 10);
  return parsed;
}

namespace {

bool has_option(const std::string& options, const std::string& wanted) {
  std::istringstream list(options);
  for (std::string option; std::getline(list, option, ',');)
    if (option == wanted) return true;
  return false;
}

// The type and the options (mount and super options) of the mount holding device `device`, from
// /proc/self/mountinfo: "<id> <parent> <major:minor> <root> <point> <options> [<tags>] - <type>
// <source> <super options>". Empty where it is not found.
std::pair<std::string, std::string> mount_of(dev_t device) {
  std::ifstream info("/proc/self/mountinfo");
  const std::string wanted = std::to_string(major(device)) + ":" + std::to_string(minor(device));
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, numbers, root, point, options, word;
    fields >> id >> parent >> numbers >> root >> point >> options;
    if (numbers != wanted) continue;
    while (fields >> word && word != "-") {
    }
    std::string type, source, super_options;
    fields >> type >> source >> super_options;
    return {type, options + "," + super_options};
  }
  return {};
}

// Whether the file system of the folder open as `dir_fd` shows every host's locks to every host.
// Local file systems are told by their magic number; network ones also need their mount options.
bool shares_locks(int dir_fd) {
  struct Known {
    unsigned long magic;
    const char* type;
    bool network;
  };
  static const Known known[] = {
      {0xEF53, "ext4", false},     {0x58465342, "xfs", false},  {0x9123683E, "btrfs", false},
      {0x01021994, "tmpfs", false}, {0x858458F6, "ramfs", false}, {0x794C7630, "overlay", false},
      {0x2FC12FC1, "zfs", false},   {0xF2F52010, "f2fs", false},  {0x6969, "nfs", true},
      {0x0BD00BD0, "lustre", true}, {0x47504653, "gpfs", false},  {0x00C36400, "ceph", false},
      {0xFF534D42, "cifs", true},   {0xFE534D42, "smb3", true},
  };
  struct statfs fs {};
  struct stat st {};
  if (::fstatfs(dir_fd, &fs) != 0 || ::fstat(dir_fd, &st) != 0) return false;
  for (const Known& k : known) {
    if (static_cast<unsigned long>(fs.f_type) != k.magic) continue;
    if (!k.network) return locks_shared_between_hosts(k.type, "");
    const auto [type, options] = mount_of(st.st_dev);
    return !type.empty() && locks_shared_between_hosts(k.type, options);
  }
  return false;
}

// Removes `name` (a temporary's name) from the folder where it is provably a dead run's file: a
// regular file of this user, unchanged for the margin, whose liveness lock is free; says so.
void remove_if_dead(int dir_fd, const std::string& dir, const std::string& name, long pid) {
  struct stat named {};
  if (::fstatat(dir_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(named.st_mode) ||
      named.st_uid != ::geteuid() || std::time(nullptr) - named.st_mtime < kStaleTemporarySeconds)
    return;
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat opened {};
  struct flock lock = liveness_lock(F_RDLCK);
  // Locked by its creator (EAGAIN) or no locks here (any other error): never removed.
  if (::fstat(fd, &opened) == 0 && opened.st_ino == named.st_ino && opened.st_dev == named.st_dev &&
      ::fcntl(fd, F_OFD_SETLK, &lock) == 0 && ::unlinkat(dir_fd, name.c_str(), 0) == 0)
    std::fprintf(stderr, "%s: note: removed %s, the temporary output of a run (process %ld) that no longer exists\n",
                 program_invocation_short_name, escape_control_characters(dir + "/" + name).c_str(), pid);
  ::close(fd);
}

}  // namespace

bool hold_liveness_lock(int fd) {
  struct flock lock = liveness_lock(F_WRLCK);
  return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

bool locks_shared_between_hosts(const std::string& type, const std::string& options) {
  for (const char* local : {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs"})
    if (type == local) return true;
  if (type == "nfs" || type == "nfs4")  // nolock, local_lock: the client keeps fcntl locks to itself
    return !has_option(options, "nolock") && !has_option(options, "local_lock=posix") &&
           !has_option(options, "local_lock=all");
  if (type == "lustre") return has_option(options, "flock");  // localflock: client-local; noflock: none
  if (type == "cifs" || type == "smb3") return !has_option(options, "nobrl");
  return type == "gpfs" || type == "ceph";
}

void remove_stale_temporaries(const std::string& dir, const std::string& host) {
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return;  // the creation reports an unusable directory
  const int dir_fd = ::dirfd(listing);
  int locks_seen = -1;  // whether the folder shows every host's locks, asked at the first candidate
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const TemporaryName owner = parse_temporary_name(name);
    // Unmarked: its creator took no lock (an older blockmm, or none could be taken), so a free lock
    // proves nothing about it.
    if (owner.pid <= 0 || !owner.locked) continue;
    // A process of that id here, perhaps the run itself: kept, whatever its lock says (a second guard).
    const bool a_pid = owner.pid <= std::numeric_limits<pid_t>::max();
    if (owner.host == host && a_pid &&
        (owner.pid == static_cast<long>(::getpid()) || ::kill(static_cast<pid_t>(owner.pid), 0) == 0 || errno != ESRCH))
      continue;
    if (locks_seen < 0) locks_seen = shares_locks(dir_fd) ? 1 : 0;
    if (locks_seen == 0) break;
    remove_if_dead(dir_fd, dir, name, owner.pid);
  }
  ::closedir(listing);
}

bool folder_shares_locks(const std::string& dir) {
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return false;
  const bool shared = shares_locks(dir_fd);
  ::close(dir_fd);
  return shared;
}

}  // namespace blockmm::io
