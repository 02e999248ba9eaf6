// io/library_guard with several threads. Each case runs in a forked child (a guard ends the
// process on a fault or a stall), stderr captured in a file: the guard of the thread that
// faults speaks, on an alternate stack of that thread's own (a stack overflow on a second
// thread used to kill the process without a word); a fault on a thread without a guard is not
// blamed on the library; each guard's timeout holds whatever other threads' guards do (one
// process-wide alarm(2) used to be cancelled by another thread's guard ending).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "io/library_guard.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::io {
namespace {

struct ChildResult {
  int code = -1;  // exit status, or 128 + signal
  double seconds = 0;
  std::string err;
};

template <typename Body>
ChildResult in_child(Body body) {
  char path[] = "/tmp/blockmm-guard-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, STDERR_FILENO);
    body();
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ChildResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  result.err = text.str();
  ::close(fd);
  ::unlink(path);
  return result;
}

// Deep recursion with frames the compiler cannot fold away: overflows any thread's stack.
int recurse(volatile int depth) {
  volatile char frame[4096];
  frame[0] = static_cast<char>(depth);
  int (*volatile self)(volatile int) = recurse;
  return self(depth + 1) + frame[0];
}

TEST(LibraryGuard, StackOverflowOnASecondThreadIsReportedByItsGuard) {
#ifdef BLOCKMM_TEST_ASAN
  GTEST_SKIP() << "ASan reports stack overflows itself";
#endif
  const ChildResult r = in_child([] {
    std::atomic<bool> first_inside{false};
    std::thread first([&] {
      const LibraryGuard guard("first.h5", "lib", "reading one");
      first_inside = true;
      std::this_thread::sleep_for(std::chrono::seconds(30));
    });
    while (!first_inside) std::this_thread::yield();
    std::thread second([] {
      const LibraryGuard guard("second.h5", "lib", "reading two");
      recurse(0);
    });
    second.join();
    first.join();
  });
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err, std::string(program_invocation_short_name) +
                       ": error: second.h5: lib crashed (SIGSEGV) reading two: the file is corrupt\n");
}

TEST(LibraryGuard, FaultOnAThreadWithoutAGuardIsNotBlamedOnTheLibrary) {
#ifdef BLOCKMM_TEST_ASAN
  GTEST_SKIP() << "ASan handles SIGSEGV itself";
#endif
  const ChildResult r = in_child([] {
    std::atomic<bool> inside{false};
    std::thread guarded([&] {
      const LibraryGuard guard("busy.h5", "lib", "reading");
      inside = true;
      std::this_thread::sleep_for(std::chrono::seconds(30));
    });
    while (!inside) std::this_thread::yield();
    ::raise(SIGSEGV);  // on the main thread, which holds no guard
    guarded.join();
  });
  EXPECT_EQ(r.code, 128 + SIGSEGV) << r.err;
  EXPECT_EQ(r.err.find("busy.h5"), std::string::npos) << r.err;
}

TEST(LibraryGuard, TimeoutHoldsWhenAnotherThreadsGuardEnds) {
  const ChildResult r = in_child([] {
    std::atomic<int> step{0};
    std::thread patient([&] {
      {
        const LibraryGuard guard("patient.h5", "lib", "reading", 60);
        step = 1;
        while (step < 2) std::this_thread::yield();
      }  // ends while the other guard is live
      step = 3;
    });
    while (step < 1) std::this_thread::yield();
    std::thread stalled([&] {
      const LibraryGuard guard("stalled.h5", "lib", "reading the root attribute", 1);
      step = 2;
      std::this_thread::sleep_for(std::chrono::seconds(6));  // a library that loops
    });
    stalled.join();
    patient.join();
  });
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_LT(r.seconds, 4.5) << r.err;
  EXPECT_EQ(r.err, std::string(program_invocation_short_name) +
                       ": error: stalled.h5: lib made no progress for 1 s reading the root attribute: the file is "
                       "corrupt (BLOCKMM_LIBRARY_TIMEOUT sets the limit)\n");
}

TEST(LibraryGuard, InnermostGuardOfTheThreadSpeaksAndOuterAfterIt) {
#ifdef BLOCKMM_TEST_ASAN
  GTEST_SKIP() << "ASan handles SIGSEGV itself";
#endif
  const ChildResult inner = in_child([] {
    const LibraryGuard outer("outer.h5", "lib", "opening");
    const LibraryGuard guard("inner.h5", "lib", "reading");
    ::raise(SIGBUS);
  });
  EXPECT_EQ(inner.code, 3);
  EXPECT_NE(inner.err.find("inner.h5: lib crashed (SIGBUS) reading"), std::string::npos) << inner.err;
  const ChildResult outer = in_child([] {
    const LibraryGuard outer_guard("outer.h5", "lib", "opening");
    { const LibraryGuard guard("inner.h5", "lib", "reading"); }
    ::raise(SIGFPE);
  });
  EXPECT_EQ(outer.code, 3);
  EXPECT_NE(outer.err.find("outer.h5: lib crashed (SIGFPE) opening"), std::string::npos) << outer.err;
  // No guard left: the default action again.
  const ChildResult none = in_child([] {
    { const LibraryGuard guard("gone.h5", "lib", "reading"); }
    ::raise(SIGSEGV);
  });
  EXPECT_EQ(none.code, 128 + SIGSEGV) << none.err;
}

}  // namespace
}  // namespace blockmm::io
