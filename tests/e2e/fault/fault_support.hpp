// What the fault tests of the blockmm executable share (fault_test.cpp, output_fault_test.cpp,
// input_fault_test.cpp, mpi_fault_test.cpp, prepared_fault_test.cpp): child processes that a test
// signals while they run (with their own process group, a deadline and their peak memory), the
// temporary output a run creates, a long run's inputs, small valid inputs, the one-line error
// check, a tmpfs mounted for a test, and mpiexec's command line.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/harness.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string build_dir() { return env_or("BLOCKMM_BUILD_DIR"); }

struct Finished {
  int exit_code = -1;  // exit status, or 128 + signal
  bool timed_out = false;
  double seconds = 0;
  long max_rss_kb = 0;  // the child's own peak resident set
  std::string out;
  std::string err;
  std::string describe() const {
    std::ostringstream s;
    s << "exit code " << exit_code << (timed_out ? " (timed out)" : "") << " after " << seconds << " s, peak RSS "
      << max_rss_kb << " KB\n--- stdout ---\n" << out.substr(0, 3000) << "\n--- stderr ---\n" << err.substr(0, 3000);
    return s.str();
  }
};

// A child in its own process group (so that a deadline can kill all of it), stdout and stderr
// captured in files, the environment of the test plus `extra_env`.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {})
      : capture_("blockmm-fault-capture"), start_(Clock::now()) {
    RunOptions options;
    options.strip_launcher_env = false;
    options.set_env = extra_env;
    pid_ = spawn_process(argv, options, capture_ / "out", capture_ / "err");
  }
  ~Child() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Its stderr so far (readable while it runs).
  std::string err() const { return slurp(capture_ / "err"); }
  // Its exit code (-1 while it runs) and stderr so far, for a failure's message.
  std::string describe() const { return "exit code " + std::to_string(result_.exit_code) + "\n--- stderr ---\n" + err(); }

  // Whether the child has exited (reaping it; the result is kept for wait()).
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    struct rusage usage {};
    const pid_t done = ::wait4(pid_, &status, WNOHANG, &usage);
    if (done != pid_) return false;
    reaped_ = true;
    result_.seconds = since(start_);
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result_.max_rss_kb = usage.ru_maxrss;
    return true;
  }

  // Waits for the child's exit, killing its process group after `timeout` seconds.
  Finished wait(double timeout) {
    const auto begin = Clock::now();
    while (!exited()) {
      if (since(begin) > timeout && !result_.timed_out) {
        result_.timed_out = true;
        ::kill(-pid_, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    result_.out = slurp(capture_ / "out");
    result_.err = slurp(capture_ / "err");
    return result_;
  }

 private:
  ScratchDir capture_;
  Clock::time_point start_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  Finished result_;
};

// The temporary output blockmm creates beside `target` ("." + name + ".blockmm-tmp.HOST.PID.XXXXXX").
inline std::vector<std::string> temporaries(const std::string& dir, const std::string& name) {
  std::vector<std::string> found;
  for (const std::string& entry : list_dir(dir))
    if (entry.rfind("." + name + ".blockmm-tmp.", 0) == 0) found.push_back(dir + "/" + entry);
  return found;
}

// Polls until a temporary file of `target` exists and holds at least `bytes` bytes (the header:
// the numeric phase has begun); "" when the child exits first or `timeout` passes.
inline std::string wait_for_temporary(Child& child, const std::string& dir, const std::string& name, std::int64_t bytes,
                                      double timeout) {
  const auto begin = Clock::now();
  while (since(begin) < timeout) {
    for (const std::string& t : temporaries(dir, name)) {
      struct stat st {};
      if (::stat(t.c_str(), &st) == 0 && st.st_size >= bytes) return t;
    }
    if (child.exited()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return "";
}

// A blockmm-gen input: n = 4096, m = 4, 5% of the blocks (2 MB). A x B gives 70 MB of output and
// takes about 3 s on the reference backend with one thread (2-core VM). Under AddressSanitizer
// (the asan-ubsan preset, -O1) the same run took 50 s, so there n = 2048: an eighth of the block
// products, 12 s, still long enough for every test that interrupts it.
#if defined(BLOCKMM_TEST_ASAN)
inline constexpr const char* kLongCaseN = "2048";
#else
inline constexpr const char* kLongCaseN = "4096";
#endif

class LongCase {
 public:
  static LongCase& get() {
    static LongCase instance;
    return instance;
  }
  std::string a() const { return dir_ / "A.bin"; }
  std::string b() const { return dir_ / "B.bin"; }
  // The slow, serial run; the temporary file holds the 12-byte header once it multiplies.
  std::vector<std::string> args(const std::string& out) const {
    return {a(), b(), out, "--backend", "reference", "--threads", "1", "--quiet"};
  }

 private:
  LongCase() : dir_("blockmm-fault-inputs") {
    const std::string gen = build_dir() + "/blockmm-gen";
    for (const auto& [name, seed] : {std::pair<const char*, const char*>{"A.bin", "1"}, {"B.bin", "2"}}) {
      const RunResult run = run_process({gen, "--n", kLongCaseN, "--m", "4", "--density", "0.05", "--seed", seed,
                                         "--max-value", "1023", "--quiet", dir_ / name});
      if (run.exit_code != 0) throw std::runtime_error("blockmm-gen failed: " + run.describe());
    }
  }
  ScratchDir dir_;
};

// A small valid pair (n = 16, m = 4) and its product size.
inline void write_small_inputs(const std::string& a, const std::string& b) {
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(a, encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}, {3, 3, fill(3)}})));
  write_bytes(b, encode(make_records(16, 4, {{0, 1, fill(4)}, {2, 0, fill(5)}, {3, 2, fill(6)}})));
}

inline ::testing::AssertionResult one_error_line(const std::string& err, const std::vector<std::string>& fragments) {
  const std::vector<std::string> lines = message_lines(err);  // besides the log's header
  if (lines.size() != 1) return ::testing::AssertionFailure() << "expected one message line on stderr:\n" << err;
  if (lines[0].rfind("blockmm: error: ", 0) != 0) return ::testing::AssertionFailure() << "not an error line: " << lines[0];
  for (const std::string& f : fragments)
    if (lines[0].find(f) == std::string::npos) return ::testing::AssertionFailure() << "message lacks '" << f << "': " << lines[0];
  return ::testing::AssertionSuccess();
}

inline RunOptions within(double seconds) {
  RunOptions options;
  options.timeout_seconds = seconds;
  return options;
}

// A tmpfs of `kilobytes` mounted on `dir` for the scope (mounted() false where mounting is not
// allowed: the test then skips, giving why()).
class MountedTmpfs {
 public:
  MountedTmpfs(const std::string& dir, int kilobytes) : dir_(dir) {
    const std::string options = "size=" + std::to_string(kilobytes) + "k,mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = std::strerror(errno);
    }
  }
  ~MountedTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  MountedTmpfs(const MountedTmpfs&) = delete;
  MountedTmpfs& operator=(const MountedTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string why_;
};

inline constexpr const char* kPrevious = "the previous output, which a failed run must leave alone\n";

// mpiexec -n `ranks` with the flags the build found (BLOCKMM_MPIEXEC_FLAGS).
inline std::vector<std::string> mpiexec_command(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string f; flags >> f;) argv.push_back(f);
  return argv;
}

}  // namespace blockmm::e2e
