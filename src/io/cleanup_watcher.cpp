#include "io/cleanup_watcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace blockmm::io {
namespace {

int g_socket = -1;        // this process's end of the socket pair; -1: no watcher
bool g_started = false;
bool g_silenced = false;  // a message could not be sent whole: the watcher hears nothing more

// A slot registered (path_bytes > 0: the path's bytes follow) or unregistered (path_bytes 0).
struct Message {
  std::int32_t slot;
  std::uint32_t path_bytes;
  std::uint64_t inode;
};

bool read_fully(int fd, void* to, std::size_t bytes) {
  auto* at = static_cast<char*>(to);
  while (bytes > 0) {
    const ssize_t got = ::read(fd, at, bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    at += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

// MSG_NOSIGNAL: a watcher that is gone must not raise SIGPIPE here.
bool send_fully(const void* from, std::size_t bytes) {
  const auto* at = static_cast<const char*>(from);
  while (bytes > 0) {
    const ssize_t sent = ::send(g_socket, at, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    at += sent;
    bytes -= static_cast<std::size_t>(sent);
  }
  return true;
}

void send_message(const Message& message, const char* path) noexcept {
  if (g_socket < 0 || g_silenced) return;
  // A message cut short would leave the stream out of step. The watcher then removes, when this
  // process ends, only registered names that still hold their inode: never a committed output
  // (its temporary name is gone by then) nor anyone else's file.
  if (!send_fully(&message, sizeof message) || (message.path_bytes > 0 && !send_fully(path, message.path_bytes)))
    g_silenced = true;
}

// The watcher's life: registrations until the socket ends, then the leftovers go.
[[noreturn]] void watch(int socket) {
  static char paths[kWatchedSlots][PATH_MAX];
  std::uint64_t inodes[kWatchedSlots] = {};
  bool registered[kWatchedSlots] = {};
  Message message{};
  while (read_fully(socket, &message, sizeof message)) {
    if (message.slot < 0 || message.slot >= kWatchedSlots || message.path_bytes >= PATH_MAX) {
      // Out of step (never sent so): the process may still be writing its files, so nothing is
      // removed before the socket ends; what is registered still goes then, by inode.
      char sink[4096];
      for (;;) {
        const ssize_t got = ::read(socket, sink, sizeof sink);
        if (got == 0 || (got < 0 && errno != EINTR)) break;
      }
      break;
    }
    const auto slot = static_cast<std::size_t>(message.slot);
    registered[slot] = false;
    if (message.path_bytes == 0) continue;
    if (!read_fully(socket, paths[slot], message.path_bytes)) break;
    paths[slot][message.path_bytes] = '\0';
    inodes[slot] = message.inode;
    registered[slot] = true;
  }
  for (std::size_t slot = 0; slot < kWatchedSlots; ++slot) {
    struct stat st {};
    if (registered[slot] && ::lstat(paths[slot], &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uint64_t>(st.st_ino) == inodes[slot])
      ::unlink(paths[slot]);
  }
  ::_exit(0);
}

// In the forked child: no signal that ends a run ends the watcher, stdio goes to /dev/null, and
// no descriptor but the socket stays open (a launcher's pipes or sockets must see their end when
// the process they belong to ends).
[[noreturn]] void become_watcher(int socket) {
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM}) ::signal(s, SIG_IGN);
  (void)::prctl(PR_SET_NAME, "blockmm-cleanup", 0, 0, 0);
  const int kept = ::fcntl(socket, F_DUPFD, 10);
  const int null = ::open("/dev/null", O_RDWR);
  if (kept < 0 || null < 0) ::_exit(0);
  for (int fd = 0; fd < 3; ++fd) (void)::dup2(null, fd);
  if (::dup2(kept, 3) != 3) ::_exit(0);
  if (::close_range(4, ~0U, 0) != 0) {
    const long limit = std::min(::sysconf(_SC_OPEN_MAX), 65536L);
    for (int fd = 4; fd < limit; ++fd) (void)::close(fd);
  }
  watch(3);
}

}  // namespace

void start_cleanup_watcher() noexcept {
  if (g_started) return;
  g_started = true;
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return;
  const pid_t pid = ::fork();
  if (pid == 0) become_watcher(ends[1]);
  ::close(ends[1]);
  // Above stdio, so that nothing meant for stdout or stderr (closed when the program started)
  // reaches the watcher.
  g_socket = pid < 0 ? -1 : ::fcntl(ends[0], F_DUPFD_CLOEXEC, 3);
  ::close(ends[0]);
}

void watch_temporary(int slot, const char* path, std::uint64_t inode) noexcept {
  if (slot < 0 || slot >= kWatchedSlots || path == nullptr) return;
  const std::size_t length = std::strlen(path);
  if (length == 0 || length >= PATH_MAX) return;
  send_message({slot, static_cast<std::uint32_t>(length), inode}, path);
}

void unwatch_temporary(int slot) noexcept {
  if (slot < 0 || slot >= kWatchedSlots) return;
  send_message({slot, 0, 0}, nullptr);
}

}  // namespace blockmm::io
