#include "io/library_guard.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "io/atomic_output.hpp"

namespace blockmm::io {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kSignalCount = sizeof kFatalSignals / sizeof kFatalSignals[0];

// What a failure prints, prepared by the guard (the handler and the watchdog may only write).
struct Message {
  std::string head;     // "<program>: error: <file>: <library> "
  std::string tail;     // " <action>: the file is corrupt"
  std::string timeout;  // "made no progress for N s"
};

// The innermost live guard's message of this thread (read by the signal handler, which runs on
// the faulting thread). Initial-exec TLS of the executable: safe to read in a handler.
thread_local const Message* t_current = nullptr;

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

[[noreturn]] void fail_and_exit(const Message& message, bool timed_out, int signal_number) {
  write_all(message.head.data(), message.head.size());
  if (timed_out)
    write_all(message.timeout.data(), message.timeout.size());
  else
    write_text(cause(signal_number));
  write_all(message.tail.data(), message.tail.size());
  write_text(timed_out ? " (BLOCKMM_LIBRARY_TIMEOUT sets the limit)\n" : "\n");
  remove_temporary_from_signal_handler();
  ::_exit(static_cast<int>(ExitCode::bad_input));
}

// Installed handlers and what they replaced, while guards live (guarded by g_lock).
std::mutex g_lock;
int g_live_guards = 0;
struct sigaction g_previous[kSignalCount];

extern "C" void library_failed(int signal_number, siginfo_t* info, void* context) {
  const Message* message = t_current;
  if (message != nullptr) fail_and_exit(*message, false, signal_number);
  // Not inside a guard on this thread: what would have happened without guards happens.
  for (int s = 0; s < kSignalCount; ++s) {
    if (kFatalSignals[s] != signal_number) continue;
    const struct sigaction& previous = g_previous[s];
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
      previous.sa_sigaction(signal_number, info, context);
      return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
      previous.sa_handler(signal_number);
      return;
    }
  }
  // Default action: reset and re-raise (a fault re-executes the instruction on return).
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// Each thread that makes a guard gets an alternate signal stack, freed when the thread ends.
struct AlternateStack {
  std::unique_ptr<char[]> memory;
  ~AlternateStack() {
    if (!memory) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
  }
};
thread_local AlternateStack t_alternate_stack;

void ensure_alternate_stack() {
  if (t_alternate_stack.memory) return;
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // the thread has one
  constexpr std::size_t kBytes = std::size_t{1} << 16;
  std::unique_ptr<char[]> memory(new char[kBytes]);
  stack_t ours{};
  ours.ss_sp = memory.get();
  ours.ss_size = kBytes;
  if (::sigaltstack(&ours, nullptr) == 0) t_alternate_stack.memory = std::move(memory);
}

// The timeout watchdog: one thread for the process, started by the first guard with a timeout,
// sleeping until the earliest deadline of the live guards. Its state is never destroyed, so that
// exit() cannot pull it from under the thread.
struct Deadline {
  std::chrono::steady_clock::time_point when;
  const Message* message;
};
struct Watchdog {
  std::mutex lock;
  std::condition_variable changed;
  std::list<Deadline> deadlines;

  void run() {
    std::unique_lock<std::mutex> hold(lock);
    for (;;) {
      if (deadlines.empty()) {
        changed.wait(hold);
        continue;
      }
      auto earliest = deadlines.begin();
      for (auto d = deadlines.begin(); d != deadlines.end(); ++d)
        if (d->when < earliest->when) earliest = d;
      if (std::chrono::steady_clock::now() >= earliest->when) fail_and_exit(*earliest->message, true, 0);
      // A copy: the guard may end (and its entry go) while this thread waits.
      const std::chrono::steady_clock::time_point until = earliest->when;
      changed.wait_until(hold, until);
    }
  }
};

Watchdog& watchdog() {
  static Watchdog* const instance = [] {
    auto* w = new Watchdog;
    std::thread([w] { w->run(); }).detach();
    return w;
  }();
  return *instance;
}

}  // namespace

struct LibraryGuard::Saved {
  Message message;
  const Message* outer = nullptr;
  bool timed = false;
  std::list<Deadline>::iterator deadline;
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
  ensure_alternate_stack();
  {
    const std::lock_guard<std::mutex> hold(g_lock);
    if (g_live_guards++ == 0) {
      struct sigaction on_fault {};
      on_fault.sa_sigaction = library_failed;
      sigemptyset(&on_fault.sa_mask);
      on_fault.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
      for (int s = 0; s < kSignalCount; ++s) ::sigaction(kFatalSignals[s], &on_fault, &g_previous[s]);
    }
  }
  saved_->outer = t_current;
  t_current = &saved_->message;
  if (timeout_seconds > 0) {
    Watchdog& w = watchdog();
    const std::lock_guard<std::mutex> hold(w.lock);
    w.deadlines.push_back({std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds), &saved_->message});
    saved_->deadline = std::prev(w.deadlines.end());
    saved_->timed = true;
    w.changed.notify_one();
  }
#endif
}

LibraryGuard::~LibraryGuard() {
  if (saved_ == nullptr) return;
  if (saved_->timed) {
    Watchdog& w = watchdog();
    const std::lock_guard<std::mutex> hold(w.lock);
    w.deadlines.erase(saved_->deadline);
    w.changed.notify_one();
  }
  t_current = saved_->outer;
  {
    const std::lock_guard<std::mutex> hold(g_lock);
    if (--g_live_guards == 0)
      for (int s = 0; s < kSignalCount; ++s) ::sigaction(kFatalSignals[s], &g_previous[s], nullptr);
  }
  delete saved_;
}

namespace {
std::atomic<unsigned> g_metadata_timeout{60};
}  // namespace

unsigned LibraryGuard::metadata_timeout_seconds() { return g_metadata_timeout.load(std::memory_order_relaxed); }

void LibraryGuard::set_metadata_timeout_seconds(unsigned seconds) {
  if (seconds > 0) g_metadata_timeout.store(seconds, std::memory_order_relaxed);
}

}  // namespace blockmm::io
