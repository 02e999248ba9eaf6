// Files for the io tests: a temporary file in TMPDIR or a given folder, read back whole.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace blockmm::io {

inline std::string default_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

inline bool is_tmpfs(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// TMPDIR, and /dev/shm too where that is a tmpfs and TMPDIR is not.
inline std::vector<std::string> test_dirs() {
  std::vector<std::string> dirs{default_dir()};
  if (is_tmpfs("/dev/shm") && !is_tmpfs(default_dir())) dirs.push_back("/dev/shm");
  return dirs;
}

class TempFile {
 public:
  explicit TempFile(const std::string& dir = default_dir()) {
    path_ = dir + "/blockmm-mapped-XXXXXX";
    fd_ = ::mkstemp(path_.data());
    if (fd_ < 0) throw std::runtime_error("mkstemp failed");
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  // A second descriptor (the writer takes the one it is given).
  int dup() const { return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0); }
  std::vector<unsigned char> contents() const {
    std::vector<unsigned char> bytes;
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bytes;
    unsigned char buffer[1 << 16];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;) bytes.insert(bytes.end(), buffer, buffer + got);
    ::close(fd);
    return bytes;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// A new folder in `dir`, removed with what it holds (plain files) when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& dir = default_dir()) {
    path_ = dir + "/blockmm-io-XXXXXX";
    if (::mkdtemp(path_.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    for (const std::string& name : names()) ::unlink((path_ + "/" + name).c_str());
    ::rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // The names of what it holds.
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    if (DIR* listing = ::opendir(path_.c_str())) {
      while (const dirent* entry = ::readdir(listing))
        if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..") found.push_back(entry->d_name);
      ::closedir(listing);
    }
    return found;
  }

 private:
  std::string path_;
};

}  // namespace blockmm::io
