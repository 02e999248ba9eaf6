#include "io/library_guard.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "io/atomic_output.hpp"

namespace blockmm::io {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kSignalCount = sizeof kFatalSignals / sizeof kFatalSignals[0];

// What the handler prints, prepared by the innermost live guard (the handler may only write).
struct Message {
  std::string head;     // "<program>: error: <file>: <library> "
  std::string tail;     // " <action>: the file is corrupt"
  std::string timeout;  // "made no progress for N s"
};
const Message* volatile g_current = nullptr;

void write_all(const char* text, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    size -= static_cast<std::size_t>(n);
  }
}
void write_text(const char* text) { write_all(text, std::strlen(text)); }

const char* cause(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "crashed (SIGSEGV)";
    case SIGBUS: return "crashed (SIGBUS)";
    case SIGFPE: return "crashed (SIGFPE)";
    case SIGILL: return "crashed (SIGILL)";
    case SIGABRT: return "aborted (SIGABRT)";
    default: return "failed";
  }
}

extern "C" void library_failed(int signal_number) {
  const Message* message = g_current;
  if (message != nullptr) {
    write_all(message->head.data(), message->head.size());
    if (signal_number == SIGALRM)
      write_all(message->timeout.data(), message->timeout.size());
    else
      write_text(cause(signal_number));
    write_all(message->tail.data(), message->tail.size());
    write_text(signal_number == SIGALRM ? " (BLOCKMM_LIBRARY_TIMEOUT sets the limit)\n" : "\n");
  }
  remove_temporary_from_signal_handler();
  ::_exit(static_cast<int>(ExitCode::bad_input));
}

// A crash may be a stack overflow (a recursive parser on a cyclic structure): the handler runs
// on a stack of its own.
[[maybe_unused]] void ensure_alternate_stack() {
  static bool done = false;
  if (done) return;
  done = true;
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  static char stack[1 << 16];
  stack_t ours{};
  ours.ss_sp = stack;
  ours.ss_size = sizeof stack;
  ::sigaltstack(&ours, nullptr);
}

}  // namespace

struct LibraryGuard::Saved {
  Message message;
  const Message* outer = nullptr;
  struct sigaction previous[kSignalCount] {};
  struct sigaction previous_alarm {};
  unsigned timeout = 0;
  unsigned outer_alarm = 0;
};

LibraryGuard::LibraryGuard(const std::string& file, const char* library, const std::string& action,
                           unsigned timeout_seconds) {
#if defined(BLOCKMM_FUZZING)
  (void)file, (void)library, (void)action, (void)timeout_seconds;
#else
  saved_ = new Saved;
  saved_->message.head = std::string(program_invocation_short_name) + ": error: " + file + ": " + library + " ";
  saved_->message.tail = " " + action + ": the file is corrupt";
  saved_->message.timeout = "made no progress for " + std::to_string(timeout_seconds) + " s";
  saved_->timeout = timeout_seconds;
  ensure_alternate_stack();
  saved_->outer = g_current;
  g_current = &saved_->message;

  struct sigaction action_on_fault {};
  action_on_fault.sa_handler = library_failed;
  sigemptyset(&action_on_fault.sa_mask);
  action_on_fault.sa_flags = SA_ONSTACK | SA_NODEFER;
  for (int s = 0; s < kSignalCount; ++s) ::sigaction(kFatalSignals[s], &action_on_fault, &saved_->previous[s]);
  if (timeout_seconds > 0) {
    ::sigaction(SIGALRM, &action_on_fault, &saved_->previous_alarm);
    saved_->outer_alarm = ::alarm(timeout_seconds);
  }
#endif
}

LibraryGuard::~LibraryGuard() {
  if (saved_ == nullptr) return;
  if (saved_->timeout > 0) {
    ::alarm(0);
    ::sigaction(SIGALRM, &saved_->previous_alarm, nullptr);
    if (saved_->outer_alarm > 0) ::alarm(saved_->outer_alarm);  // an outer timer goes on (rounded to seconds)
  }
  for (int s = 0; s < kSignalCount; ++s) ::sigaction(kFatalSignals[s], &saved_->previous[s], nullptr);
  g_current = saved_->outer;
  delete saved_;
}

unsigned LibraryGuard::metadata_timeout_seconds() {
  if (const char* text = std::getenv("BLOCKMM_LIBRARY_TIMEOUT")) {
    char* end = nullptr;
    const unsigned long seconds = std::strtoul(text, &end, 10);
    if (end != text && *end == '\0' && seconds > 0 && seconds < 86400) return static_cast<unsigned>(seconds);
  }
  return 60;
}

}  // namespace blockmm::io
