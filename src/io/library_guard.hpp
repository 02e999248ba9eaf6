// A guard around calls into a library that may crash or loop forever on a corrupt file instead of
// returning an error. libhdf5 1.10 does both on some damaged files (its global-heap reader, used
// for variable-length strings, trusts the sizes it finds; fuzzing found dozens of such files): a
// user who passes one to blockmm must get the one-line bad-input error and exit code 3, not a
// segmentation fault or a job that hangs until its time limit.
//
// While a guard lives, a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) raised by the
// thread that made the guard and, when `timeout_seconds` > 0, the expiry of that many seconds
// print one line naming the file and the cause, remove the temporary output file (as SIGTERM
// does) and end the process with exit code 3 at once: the library's state cannot be trusted
// after either, so nothing else runs. Guards nest; the innermost one of the thread speaks.
//
// Threads: guards are per thread. Any number of threads may hold guards at once, in any order.
// The handlers are installed while at least one guard lives (once, under a lock) and then the
// previous dispositions come back; a fatal signal on a thread without a guard goes to the
// previous disposition (a crash elsewhere is not blamed on the library). Each thread that makes
// a guard gets an alternate signal stack of its own (a crash may be a stack overflow), kept
// until the thread ends. Timeouts are watched by one helper thread (no process-wide alarm(2)),
// each guard against its own deadline.
//
// In fuzzing builds (BLOCKMM_FUZZING) guards do nothing, so that the sanitizers and libFuzzer
// see the library's faults themselves.
#pragma once

#include <string>

namespace blockmm::io {

class LibraryGuard {
 public:
  // The message reads "<program>: error: <file>: <library> crashed (SIGSEGV) <action>: the file is
  // corrupt", e.g. action "reading the root attribute 'format'".
  LibraryGuard(const std::string& file, const char* library, const std::string& action, unsigned timeout_seconds = 0);
  ~LibraryGuard();
  LibraryGuard(const LibraryGuard&) = delete;
  LibraryGuard& operator=(const LibraryGuard&) = delete;

  // Seconds a single small metadata read may take before it counts as a hang (60 until a
  // program sets its own, from its settings, before it reads any file).
  static unsigned metadata_timeout_seconds();
  static void set_metadata_timeout_seconds(unsigned seconds);

 private:
  struct Saved;
  Saved* saved_ = nullptr;
};

}  // namespace blockmm::io
