#include "io/atomic_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/error.hpp"

namespace blockmm::io {
namespace {

// The temporary file a signal handler must remove. A plain array and a flag: the handler
// may only use async-signal-safe calls.
char g_cleanup_path[4096];
volatile std::sig_atomic_t g_cleanup_armed = 0;

extern "C" void remove_temporary_and_reraise(int signal_number) {
  if (g_cleanup_armed) ::unlink(g_cleanup_path);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void arm_cleanup(const std::string& path) {
  if (path.size() >= sizeof g_cleanup_path) return;
  g_cleanup_armed = 0;
  std::memcpy(g_cleanup_path, path.c_str(), path.size() + 1);
  g_cleanup_armed = 1;
}

void disarm_cleanup() { g_cleanup_armed = 0; }

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Creates the temporary file with O_EXCL and the permissions a plain creat(2) would give.
std::string create_temporary(const std::string& target) {
  if (target.empty() || target.back() == '/') throw UsageError("output path '" + target + "' names no file");
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw OutputError(target + ": is a directory");
  const std::string dir = directory_of(target);
  std::string pattern = dir + "/." + base_name(target) + ".tmp-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0)
    throw OutputError(target + ": cannot create a temporary file in " + dir + ": " + std::strerror(errno));
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0 || ::close(fd) != 0) {
    const int saved = errno;
    ::unlink(pattern.c_str());
    throw OutputError(target + ": cannot prepare the temporary file " + pattern + ": " + std::strerror(saved));
  }
  return pattern;
}

}  // namespace

void remove_temporary_from_signal_handler() noexcept {
  if (g_cleanup_armed) ::unlink(g_cleanup_path);
}

void install_cleanup_handlers() {
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction action {};
    action.sa_handler = remove_temporary_and_reraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(s, &action, nullptr);
  }
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
  try {
    comm.run_phase([&] {
      if (!comm.is_root()) return;
      temporary_ = create_temporary(target);
      arm_cleanup(temporary_);  // at once: a signal during the collectives below must not leave it
    });
    comm.broadcast(temporary_, 0);
  } catch (...) {
    abandon();  // no destructor runs for a constructor that throws
    throw;
  }
  arm_cleanup(temporary_);
}

AtomicOutput::~AtomicOutput() { abandon(); }

void AtomicOutput::commit() {
  if (in_place_) {
    done_ = true;
    return;
  }
  comm_.barrier();  // every rank has closed the file
  comm_.run_phase([&] {
    if (!comm_.is_root()) return;
    if (::rename(temporary_.c_str(), target_.c_str()) != 0)
      throw OutputError(target_ + ": cannot rename the temporary file " + temporary_ + " into place: " +
                        std::strerror(errno));
    // The rename itself must survive a crash: sync the directory entry.
    const int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  });
  done_ = true;
  disarm_cleanup();
}

void AtomicOutput::abandon() noexcept {
  if (done_) return;
  done_ = true;
  if (in_place_) return;
  disarm_cleanup();
  if (!temporary_.empty()) ::unlink(temporary_.c_str());  // every rank tries; ENOENT is fine
}

}  // namespace blockmm::io
