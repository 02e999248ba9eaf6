// Fault injection against the real blockmm executable (label "fault"): outputs on a full device
// (/dev/full, a tiny tmpfs), SIGTERM / SIGINT while the temporary output exists, inputs that
// cannot be read (a directory without search permission, a FIFO), a rank SIGKILLed under
// mpirun -np 3 and mpirun itself terminated, and headers (binary and HDF5) that claim huge sizes
// in tiny files. In every case: the documented exit code, no output file, no temporary file,
// an existing output untouched, no hang (every run has a deadline), and small memory use.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "support/harness.hpp"
#include "e2e/fault/processes.hpp"
#include "support/sanitizers.hpp"


namespace blockmm::e2e {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string build_dir() { return env_or("BLOCKMM_BUILD_DIR"); }

// ---------- child processes that the test signals while they run ----------

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
std::vector<std::string> temporaries(const std::string& dir, const std::string& name) {
  std::vector<std::string> found;
  for (const std::string& entry : list_dir(dir))
    if (entry.rfind("." + name + ".blockmm-tmp.", 0) == 0) found.push_back(dir + "/" + entry);
  return found;
}

// Polls until a temporary file of `target` exists and holds at least `bytes` bytes (the header:
// the numeric phase has begun); "" when the child exits first or `timeout` passes.
std::string wait_for_temporary(Child& child, const std::string& dir, const std::string& name, std::int64_t bytes,
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
constexpr const char* kLongCaseN = "2048";
#else
constexpr const char* kLongCaseN = "4096";
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
void write_small_inputs(const std::string& a, const std::string& b) {
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(a, encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}, {3, 3, fill(3)}})));
  write_bytes(b, encode(make_records(16, 4, {{0, 1, fill(4)}, {2, 0, fill(5)}, {3, 2, fill(6)}})));
}

::testing::AssertionResult one_error_line(const std::string& err, const std::vector<std::string>& fragments) {
  const std::vector<std::string> lines = split_lines(err);
  if (lines.size() != 1) return ::testing::AssertionFailure() << "expected one line on stderr:\n" << err;
  if (lines[0].rfind("blockmm: error: ", 0) != 0) return ::testing::AssertionFailure() << "not an error line: " << lines[0];
  for (const std::string& f : fragments)
    if (lines[0].find(f) == std::string::npos) return ::testing::AssertionFailure() << "message lacks '" << f << "': " << lines[0];
  return ::testing::AssertionSuccess();
}

RunOptions within(double seconds) {
  RunOptions options;
  options.timeout_seconds = seconds;
  return options;
}

const char* kPrevious = "the previous output, which a failed run must leave alone\n";

// ---------- full devices ----------

TEST(FaultOutput, DevFullBinaryGivesExit4) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const RunResult run = run_blockmm({dir / "A.bin", dir / "B.bin", "/dev/full", "--quiet"}, within(30));
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {"/dev/full"}));
  EXPECT_TRUE(temporaries("/dev", "full").empty()) << "a temporary file was left in /dev";
}

TEST(FaultOutput, DevFullHdf5GivesExit4) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const RunResult run = run_blockmm({dir / "A.bin", dir / "B.bin", "/dev/full", "--format", "h5", "--quiet"}, within(30));
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {"/dev/full"}));
  EXPECT_TRUE(temporaries("/dev", "full").empty()) << "a temporary file was left in /dev";
}

// A tmpfs of `kilobytes` mounted on `dir` for the scope; skips the test where mounting is not allowed.
class TinyTmpfs {
 public:
  TinyTmpfs(const std::string& dir, int kilobytes) : dir_(dir) {
    const std::string options = "size=" + std::to_string(kilobytes) + "k,mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = std::strerror(errno);
    }
  }
  ~TinyTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string why_;
};

// inputs/A.bin x inputs/B.bin is 144 KB of output: more than the 64 KB tmpfs holds.
void run_on_tiny_tmpfs(const std::string& out_name, bool existing_output, const std::vector<std::string>& env = {}) {
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";
  ScratchDir dir("blockmm-fault");
  const std::string mnt = dir.subdir("mnt");
  TinyTmpfs tmpfs(mnt, 64);
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (" << tmpfs.why() << "): needs root";
  const std::string target = mnt + "/" + out_name;
  if (existing_output) write_text(target, kPrevious);
  RunOptions options = within(60);
  options.set_env.insert(options.set_env.end(), env.begin(), env.end());
  const RunResult run = run_blockmm({inputs + "/A.bin", inputs + "/B.bin", target, "--quiet"}, options);
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {target}));
  EXPECT_EQ(list_dir(mnt), existing_output ? std::vector<std::string>{out_name} : std::vector<std::string>{})
      << "partial or temporary output left on the full file system";
  if (existing_output) {
    EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
  }
}

TEST(FaultOutput, TinyTmpfsBinaryGivesExit4AndKeepsExistingOutput) { run_on_tiny_tmpfs("C.bin", true); }
TEST(FaultOutput, TinyTmpfsHdf5GivesExit4AndLeavesNothing) { run_on_tiny_tmpfs("C.h5", false); }
// The same through the mapped writer (io/mapped_writer, which a few cores do not choose by
// default): on tmpfs its reservation checks the free space instead of fallocating.
TEST(FaultOutput, TinyTmpfsMappedWriterGivesExit4) {
  run_on_tiny_tmpfs("C.bin", true, {"BLOCKMM_WRITE_THREADS=2"});
  run_on_tiny_tmpfs("C.h5", false, {"BLOCKMM_WRITE_THREADS=2"});
}

// ---------- signals ----------

class FaultSignal : public ::testing::TestWithParam<int> {};

TEST_P(FaultSignal, RemovesTemporaryAndKeepsExistingOutput) {
  const int sig = GetParam();
  const LongCase& inputs = LongCase::get();
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/C.bin";
  write_text(target, kPrevious);
  Child child([&] {
    std::vector<std::string> argv{blockmm_bin()};
    for (const std::string& a : inputs.args(target)) argv.push_back(a);
    return argv;
  }());
  const std::string temp = wait_for_temporary(child, out, "C.bin", 12, 120);
  ASSERT_FALSE(temp.empty()) << "the run ended before its temporary output held the header (make the case bigger)\n"
                             << child.wait(10).describe();
  ASSERT_EQ(::kill(child.pid(), sig), 0);
  const Finished done = child.wait(60);
  EXPECT_FALSE(done.timed_out) << done.describe();
  EXPECT_EQ(done.exit_code, 128 + sig) << "expected death by signal " << sig << "\n" << done.describe();
  EXPECT_FALSE(path_exists(temp)) << "temporary file " << temp << " left behind";
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.bin"});
  EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
}

// SIGPIPE too: a rank whose launcher is gone dies by it at its next write to stdout or stderr.
INSTANTIATE_TEST_SUITE_P(TermIntAndPipe, FaultSignal, ::testing::Values(SIGTERM, SIGINT, SIGPIPE),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(param.param == SIGTERM ? "SIGTERM" : param.param == SIGINT ? "SIGINT" : "SIGPIPE");
                         });

// A run SIGKILLed with its process group (its cleanup watcher too: io/cleanup_watcher.hpp), or
// its node lost, cannot clean up: its temporary file stays, named after the host and the
// process. The next run on the same output removes it (the process is gone) and says so; a
// temporary file of a live process is left alone (tests/e2e/fault/leftovers_test.cpp: other outputs).
TEST(FaultSignal, SigkillLeftoverIsRemovedByTheNextRun) {
  const LongCase& inputs = LongCase::get();
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/C.bin";
  Child child([&] {
    std::vector<std::string> argv{blockmm_bin()};
    for (const std::string& a : inputs.args(target)) argv.push_back(a);
    return argv;
  }());
  const std::string temp = wait_for_temporary(child, out, "C.bin", 12, 120);
  ASSERT_FALSE(temp.empty()) << child.wait(10).describe();
  EXPECT_NE(temp.find(".blockmm-tmp."), std::string::npos);
  EXPECT_NE(temp.find("." + std::to_string(child.pid()) + "."), std::string::npos) << temp << " lacks the pid";
  ASSERT_EQ(::kill(-child.pid(), SIGKILL), 0);
  child.wait(30);
  ASSERT_TRUE(path_exists(temp)) << "SIGKILL cannot be caught: the temporary file should still be there";
  // A live run's temporary (this test's own pid) must survive the sweep.
  const std::string pid = std::to_string(child.pid());
  const std::string live = temp.substr(0, temp.size() - 7 - pid.size()) + std::to_string(::getpid()) + ".abcdef";
  write_text(live, "a live run's partial output\n");

  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const RunResult next = run_blockmm({dir / "A.bin", dir / "B.bin", target, "--quiet"}, within(60));
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_FALSE(path_exists(temp)) << "the stale temporary file of the killed run was not removed";
  EXPECT_NE(next.err.find("removed " + temp), std::string::npos) << "the removal was not reported\n" << next.describe();
  EXPECT_TRUE(path_exists(live)) << "a live process's temporary file was removed";
  EXPECT_EQ(list_dir(out), (std::vector<std::string>{live.substr(out.size() + 1), "C.bin"}));
}

// ---------- a temporary output swapped for a link ----------

// Whoever can write the output folder swaps the temporary file for a symlink to another file while
// blockmm runs: as soon as it exists ("early": before HDF5 lays the file out, before any value),
// or once values are being written ("late": caught at the commit). blockmm must never write
// through the link (the victim keeps its bytes and stays a plain file), never rename the link over
// the target, and fail with exit 4.
class FaultSwap : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(FaultSwap, SymlinkInPlaceOfTheTemporaryIsNeverWrittenThrough) {
  const std::string name = "C." + std::get<0>(GetParam());
  const bool late = std::get<1>(GetParam()) == "late";
  const LongCase& inputs = LongCase::get();
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/" + name;
  const std::string victim = dir / "victim.txt";
  const std::string precious = "a file the attacker wants blockmm to overwrite\n";
  write_text(target, kPrevious);
  write_text(victim, precious);
  Child child([&] {
    std::vector<std::string> argv{blockmm_bin()};
    for (const std::string& a : inputs.args(target)) argv.push_back(a);
    return argv;
  }());
  // Late: the HDF5 layout or the binary header is in the file, so the numeric phase has begun.
  const std::string temp = wait_for_temporary(child, out, name, late ? 12 : 0, 120);
  ASSERT_FALSE(temp.empty()) << child.wait(10).describe();
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  ASSERT_TRUE(path_exists(temp)) << "the run ended before the swap (make the case bigger)";
  const std::string link = out + "/swap";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(::rename(link.c_str(), temp.c_str()), 0);
  ASSERT_EQ(::kill(child.pid(), SIGCONT), 0);
  const Finished done = child.wait(180);
  EXPECT_FALSE(done.timed_out) << done.describe();
  EXPECT_EQ(done.exit_code, 4) << done.describe();
  EXPECT_TRUE(one_error_line(done.err, {target, "replaced"})) << done.describe();
  struct stat st {};
  ASSERT_EQ(::lstat(victim.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link's target is no longer a plain file";
  EXPECT_EQ(slurp(victim), precious) << "blockmm wrote through the link";
  ASSERT_EQ(::lstat(target.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link was renamed over the target";
  EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
  // The link is the attacker's, not blockmm's to remove; nothing else is left.
  for (const std::string& entry : list_dir(out)) {
    if (entry == name) continue;
    EXPECT_EQ(out + "/" + entry, temp) << "unexpected file left: " << entry;
    ASSERT_EQ(::lstat((out + "/" + entry).c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << "blockmm's own temporary file was left: " << entry;
  }
}

INSTANTIATE_TEST_SUITE_P(FormatsAndMoments, FaultSwap,
                         ::testing::Combine(::testing::Values("bin", "h5"), ::testing::Values("early", "late")),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& param) {
                           return std::get<0>(param.param) + "_" + std::get<1>(param.param);
                         });

// ---------- a file-size limit (ulimit -f) ----------

// Starts `argv` with RLIMIT_FSIZE set to `bytes` (SIGXFSZ left at its default, as a shell's
// `ulimit -f` leaves it): blockmm and its tools must report EFBIG as exit 4, not die by SIGXFSZ.
Finished run_with_file_size_limit(rlim_t bytes, const std::vector<std::string>& argv) {
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  struct rlimit limited = old;
  limited.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &limited);  // inherited by the child forked next; this process writes nothing meanwhile
  Child child(argv);
  ::setrlimit(RLIMIT_FSIZE, &old);
  return child.wait(120);
}

::testing::AssertionResult too_large_cleanly(const Finished& done, const std::string& tool, const std::string& target,
                                             const std::string& dir, const std::vector<std::string>& entries) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << done.describe(); };
  if (done.exit_code != 4) return failure("expected exit code 4");
  const std::vector<std::string> lines = split_lines(done.err);
  if (lines.size() != 1 || lines[0].rfind(tool + ": error: " + target + ": ", 0) != 0 ||
      lines[0].find("File too large") == std::string::npos)
    return failure("expected one line '" + tool + ": error: " + target + ": ... File too large'");
  if (list_dir(dir) != entries) return failure("partial or temporary output left");
  return ::testing::AssertionSuccess();
}

TEST(FaultOutput, FileSizeLimitGivesExit4InEveryProgram) {
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";  // 144 KB of product
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  for (const std::string name : {"C.bin", "C.h5"}) {
    SCOPED_TRACE(name);
    write_text(out + "/" + name, kPrevious);
    const Finished done = run_with_file_size_limit(
        64 << 10, {blockmm_bin(), inputs + "/A.bin", inputs + "/B.bin", out + "/" + name, "--quiet"});
    EXPECT_TRUE(too_large_cleanly(done, "blockmm", out + "/" + name, out, {name}));
    EXPECT_EQ(slurp(out + "/" + name), kPrevious);
    ::unlink((out + "/" + name).c_str());
  }
  const Finished gen = run_with_file_size_limit(
      64 << 10, {build_dir() + "/blockmm-gen", "--n", "1024", "--m", "4", "--density", "0.5", "--max-value", "65535", "-q",
               out + "/G.bin"});
  EXPECT_TRUE(too_large_cleanly(gen, "blockmm-gen", out + "/G.bin", out, {}));
  const Finished convert =
      run_with_file_size_limit(64 << 10, {build_dir() + "/blockmm-convert", inputs + "/expected_C.bin", out + "/E.h5"});
  EXPECT_TRUE(too_large_cleanly(convert, "blockmm-convert", out + "/E.h5", out, {}));
}

// ---------- unreadable inputs ----------

std::string find_program(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c;
  return "";
}

TEST(FaultInput, PathThroughDirectoryWithoutSearchPermissionGivesExit3) {
  ScratchDir dir("blockmm-fault");
  ::chmod(dir.path().c_str(), 0711);
  const std::string locked = dir.subdir("locked");
  const std::string open = dir.subdir("open");
  const std::string out = dir.subdir("out");
  write_small_inputs(locked + "/A.bin", open + "/B.bin");
  ::chmod(open.c_str(), 0755);
  ::chmod((open + "/B.bin").c_str(), 0644);
  ::chmod(out.c_str(), 0777);

  std::vector<std::string> prefix;  // how to run blockmm without the right to enter `locked`
  if (::geteuid() != 0) {
    ::chmod(locked.c_str(), 0);
  } else {
    // chmod does not stop root: run as nobody, for whom the root-owned 0700 directory is closed.
    ::chmod(locked.c_str(), 0700);
    const std::string setpriv = find_program({"/usr/bin/setpriv", "/bin/setpriv"});
    const std::string runuser = find_program({"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"});
    if (!setpriv.empty()) {
      prefix = {setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    } else if (!runuser.empty()) {
      prefix = {runuser, "-u", "nobody", "--"};
    } else {
      GTEST_SKIP() << "running as root without setpriv or runuser: cannot take away read permission";
    }
    std::vector<std::string> probe = prefix;
    probe.insert(probe.end(), {blockmm_bin(), "--version"});
    const RunResult can_run = run_process(probe, within(30));
    if (can_run.exit_code != 0)
      GTEST_SKIP() << "user nobody cannot run " << blockmm_bin() << " here:\n" << can_run.describe();
  }
  std::vector<std::string> argv = prefix;
  argv.insert(argv.end(), {blockmm_bin(), locked + "/A.bin", open + "/B.bin", out + "/C.bin", "--quiet"});
  const RunResult run = run_process(argv, within(30));
  EXPECT_EQ(run.exit_code, 3) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {locked + "/A.bin", "Permission denied"}));
  EXPECT_TRUE(list_dir(out).empty());
}

TEST(FaultInput, FifoGivesExit3WithoutWaitingForAWriter) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const std::string out = dir.subdir("out");
  for (const bool as_b : {false, true}) {
    const std::string fifo = dir / (as_b ? "fifo_b" : "fifo_a");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    const RunResult run = run_blockmm({as_b ? dir / "A.bin" : fifo, as_b ? fifo : dir / "B.bin", out + "/C.bin", "--quiet"},
                                      within(20));
    EXPECT_FALSE(run.timed_out) << "blockmm waited for a writer on the FIFO";
    EXPECT_EQ(run.exit_code, 3) << run.describe();
    EXPECT_TRUE(one_error_line(run.err, {fifo, "not a regular file"}));
    EXPECT_TRUE(list_dir(out).empty());
  }
}

// ---------- corrupt HDF5 files on which libhdf5 itself crashes or loops ----------

std::vector<std::string> mpiexec_command(int ranks);

// --stats-file in a missing folder under mpirun -np 2: every rank fails with exit 4 before the
// product replaces the old output (each rank's own exit code is recorded by a wrapper shell).
TEST(FaultMpiStats, FailingStatsFileFailsEveryRankBeforeTheCommit) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/C.bin";
  write_text(target, kPrevious);
  std::vector<std::string> argv = mpiexec_command(2);
  for (const std::string& a :
       {std::string("/bin/sh"), std::string("-c"),
        std::string("\"$@\"; echo $? > \"") + dir.path() + "/rc.$OMPI_COMM_WORLD_RANK\"", std::string("sh"),
        blockmm_bin(), dir / "A.bin", dir / "B.bin", target, std::string("--quiet"), std::string("--stats-file"),
        dir / "no/such/folder/stats.json"})
    argv.push_back(a);
  Child job(argv);
  const Finished done = job.wait(120);
  EXPECT_FALSE(done.timed_out) << done.describe();
  EXPECT_EQ(slurp(dir / "rc.0"), "4\n") << done.describe();
  EXPECT_EQ(slurp(dir / "rc.1"), "4\n") << done.describe();
  EXPECT_NE(done.err.find("blockmm: error: " + dir / "no/such/folder/stats.json"), std::string::npos) << done.describe();
  EXPECT_EQ(slurp(target), kPrevious) << "the product replaced the old output although the run failed";
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.bin"});
}

// A file-size limit under mpirun -np 2, binary and HDF5: rank 0 reserves the output's storage
// before the numeric phase (io/mapped_writer) and the limit refuses it; every rank exits 4 with
// "File too large", the old output stays and no temporary file is left. The limit is set in each
// rank's shell (dash: 512-byte blocks), not on mpiexec, whose own shared-memory files pass 64 KB
// (Open MPI may then warn that its shared-memory transport fell back).
TEST(FaultMpiStats, FileSizeLimitFailsEveryRankWithExit4) {
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";  // 144 KB of product
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  // The mapped writer (reserving) and one pwrite stream (BLOCKMM_IO=pwrite: it fails at its first
  // write past the limit).
  for (const std::string threads : {"2", "0"})
  for (const std::string name : {"C.bin", "C.h5"}) {
    SCOPED_TRACE(name + ", BLOCKMM_WRITE_THREADS=" + threads);
    const std::string target = out + "/" + name;
    write_text(target, kPrevious);
    std::vector<std::string> argv = mpiexec_command(2);
    for (const std::string& a :
         {std::string("/bin/sh"), std::string("-c"),
          std::string("ulimit -f 128 && ") + (threads == "0" ? std::string("BLOCKMM_IO=pwrite ") : "BLOCKMM_WRITE_THREADS=" + threads + " ") +
              "\"$@\"; echo $? > \"" + dir.path() + "/rc.$OMPI_COMM_WORLD_RANK\"",
          std::string("sh"), blockmm_bin(), inputs + "/A.bin", inputs + "/B.bin", target, std::string("--quiet")})
      argv.push_back(a);
    Child job(argv);
    const Finished done = job.wait(120);
    EXPECT_FALSE(done.timed_out) << done.describe();
    EXPECT_EQ(slurp(dir / "rc.0"), "4\n") << done.describe();
    EXPECT_EQ(slurp(dir / "rc.1"), "4\n") << done.describe();
    EXPECT_NE(done.err.find("blockmm: error: " + target + ": "), std::string::npos) << done.describe();
    EXPECT_NE(done.err.find("File too large"), std::string::npos) << done.describe();
    EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
    EXPECT_EQ(list_dir(out), std::vector<std::string>{name}) << "partial or temporary output left";
    ::unlink(target.c_str());
    ::unlink((dir / "rc.0").c_str());
    ::unlink((dir / "rc.1").c_str());
  }
}

// Under the asan-ubsan preset, ASan's memcpy interceptor would report libhdf5's bad copy (libhdf5
// itself is not instrumented) before it faults; the test is about what blockmm does when the
// library really faults, so the interceptor steps aside (no effect on a build without ASan).
const std::string kLetLibhdf5Fail = "ASAN_OPTIONS=" + env_or("ASAN_OPTIONS") + ":replace_intrin=0";

class FaultLibhdf5 : public ::testing::TestWithParam<const char*> {};

// libhdf5 1.10.8 segfaults on one file and loops forever on the other (tests/e2e/fault/data). Either
// way blockmm gives its one-line error and exit 3 within the (here shortened) stall limit, as A
// or as B, on one rank and on two, and leaves no file behind.
TEST_P(FaultLibhdf5, CorruptFileGivesExit3NotACrashOrAHang) {
  const std::string corrupt = env_or("BLOCKMM_FAULT_DATA") + "/" + GetParam();
  ASSERT_TRUE(path_exists(corrupt)) << corrupt << " is missing";
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const std::string out = dir.subdir("out");
  for (const bool as_b : {false, true}) {
    SCOPED_TRACE(as_b ? "as B" : "as A");
    RunOptions options = within(60);
    options.set_env = {"BLOCKMM_LIBRARY_TIMEOUT=2", kLetLibhdf5Fail};
    const RunResult run = run_blockmm({as_b ? dir / "A.bin" : corrupt, as_b ? corrupt : dir / "B.bin", out + "/C.h5",
                                       "--quiet", "--threads", "1"},
                                      options);
    EXPECT_FALSE(run.timed_out) << run.describe();
    EXPECT_EQ(run.exit_code, 3) << run.describe();
    EXPECT_TRUE(one_error_line(run.err, {corrupt}));
    EXPECT_TRUE(list_dir(out).empty());
  }
  std::vector<std::string> argv = mpiexec_command(2);
  for (const std::string& a : {blockmm_bin(), corrupt, dir / "B.bin", out + "/C.bin", std::string("--quiet")})
    argv.push_back(a);
  Child job(argv, {"BLOCKMM_LIBRARY_TIMEOUT=2", kLetLibhdf5Fail});
  const Finished done = job.wait(90);
  EXPECT_FALSE(done.timed_out) << "mpirun -np 2 hung\n" << done.describe();
  EXPECT_EQ(done.exit_code, 3) << done.describe();
  EXPECT_NE(done.err.find("blockmm: error: " + corrupt + ": "), std::string::npos) << done.describe();
  EXPECT_TRUE(list_dir(out).empty());
}

INSTANTIATE_TEST_SUITE_P(Files, FaultLibhdf5, ::testing::Values("libhdf5_crashes.h5", "libhdf5_loops.h5"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return std::string(param.param).substr(8, std::string(param.param).find('.') - 8);
                         });

// ---------- headers that claim huge sizes ----------

struct HugeHeader {
  std::int32_t n, m, k;
};

class FaultHugeHeader : public ::testing::TestWithParam<HugeHeader> {};

// Peak RSS of a valid run on tiny inputs, with the same executable and environment: the yardstick.
long baseline_rss_kb() {
  static const long rss = [] {
    ScratchDir dir("blockmm-fault");
    write_small_inputs(dir / "A.bin", dir / "B.bin");
    Child child({blockmm_bin(), dir / "A.bin", dir / "B.bin", dir / "C.bin", "--quiet", "--threads", "1"});
    const Finished done = child.wait(60);
    if (done.exit_code != 0) throw std::runtime_error("baseline run failed: " + done.describe());
    return done.max_rss_kb;
  }();
  return rss;
}

TEST_P(FaultHugeHeader, TinyFileGivesExit3QuicklyWithoutAllocating) {
  const HugeHeader h = GetParam();
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "small.bin", dir / "unused.bin");
  const std::string huge = dir / "huge.bin";
  write_bytes(huge, encode_with_header(h.n, h.m, h.k, {}));
  const std::string out = dir.subdir("out");
  const long baseline = baseline_rss_kb();
  for (const bool as_b : {false, true}) {
    SCOPED_TRACE(as_b ? "as B" : "as A");
    Child child({blockmm_bin(), as_b ? dir / "small.bin" : huge, as_b ? huge : dir / "small.bin", out + "/C.bin",
                 "--quiet", "--threads", "1"});
    const Finished done = child.wait(30);
    EXPECT_EQ(done.exit_code, 3) << done.describe();
    EXPECT_TRUE(one_error_line(done.err, {huge, "truncated", "needs", "file has 12"}));
    EXPECT_LT(done.seconds, 10) << done.describe();
    // Nothing sized from the header: the run stays within a few MB of a tiny valid run.
    EXPECT_LT(done.max_rss_kb, baseline + 16 * 1024) << "baseline " << baseline << " KB\n" << done.describe();
    std::cout << "[ info ] header n = " << h.n << ", m = " << h.m << ", k = " << h.k << (as_b ? " as B" : " as A")
              << ": exit " << done.exit_code << " in " << done.seconds << " s, peak RSS " << done.max_rss_kb
              << " KB (tiny valid run: " << baseline << " KB)\n";
    EXPECT_TRUE(list_dir(out).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Claims, FaultHugeHeader,
                         ::testing::Values(HugeHeader{1 << 30, 8, 2147483647},         // k near 2^31
                                           HugeHeader{1 << 30, 1 << 15, 1 << 30},      // m = 2^15: 2 GB records
                                           HugeHeader{2147483647, 1, 2147483647},      // n = 2^31 - 1, m = 1
                                           HugeHeader{46341 * 46340, 46341, 46340 * 46340}),  // 2 m^2 > 2^32
                         [](const ::testing::TestParamInfo<HugeHeader>& param) {
                           return "n" + std::to_string(param.param.n) + "_m" + std::to_string(param.param.m) + "_k" +
                                  std::to_string(param.param.k);
                         });

// n = m = 2^31 - 1 and no blocks: a consistent 12-byte file, but one output record would need
// 8 + 4 m^2 > 2^63 bytes, which no size in the program can hold (it overflowed, undefined). The
// message names the limit a user can act on, 46340, not the one of the arithmetic.
TEST(FaultHugeHeader, BlockTooLargeForAnyRecordGivesExit3) {
  ScratchDir dir("blockmm-fault");
  const std::string huge = dir / "huge_m.bin";
  write_bytes(huge, encode_with_header(2147483647, 2147483647, 0, {}));
  const std::string out = dir.subdir("out");
  const RunResult run = run_blockmm({huge, huge, out + "/C.bin", "--quiet"}, within(30));
  EXPECT_EQ(run.exit_code, 3) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {huge, "m = 2147483647", "46340"}));
  EXPECT_TRUE(list_dir(out).empty());
}

// An HDF5 file of a few KB whose datasets were declared but never written: /indptr claims
// 2^28 + 1 entries (2 GB of fill values). It must be refused before anything is allocated.
void write_unwritten_bsr(const std::string& path, std::int64_t p) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const auto int_attr = [&](const char* name, std::int64_t value) {
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(file, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, H5T_NATIVE_INT64, &value);
    H5Aclose(attr);
    H5Sclose(space);
  };
  {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 11);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(file, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, type, "blockmm-bsr");
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
  }
  int_attr("version", 1);
  int_attr("n", p);
  int_attr("m", 1);
  int_attr("nnzb", 0);
  const auto dataset = [&](const char* name, hid_t type, std::vector<hsize_t> dims) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(plist, H5D_ALLOC_TIME_LATE);  // declared, never written: no storage
    const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    H5Dclose(set);
    H5Pclose(plist);
    H5Sclose(space);
  };
  dataset("indptr", H5T_STD_I64LE, {static_cast<hsize_t>(p + 1)});
  dataset("indices", H5T_STD_I32LE, {0});
  dataset("data", H5T_STD_U16LE, {0, 1, 1});
  ASSERT_GE(H5Fclose(file), 0);
}

TEST(FaultHugeHeader, Hdf5DatasetsDeclaredButNeverWrittenGiveExit3) {
  ScratchDir dir("blockmm-fault");
  const std::string huge = dir / "huge.h5";
  write_unwritten_bsr(huge, std::int64_t{1} << 28);
  write_small_inputs(dir / "small.bin", dir / "unused.bin");
  const std::string out = dir.subdir("out");
  const long baseline = baseline_rss_kb();
  Child child({blockmm_bin(), huge, dir / "small.bin", out + "/C.bin", "--quiet", "--threads", "1"});
  const Finished done = child.wait(60);
  EXPECT_EQ(done.exit_code, 3) << done.describe();
  EXPECT_TRUE(one_error_line(done.err, {huge, "/indptr", "stores 0"}));
  EXPECT_LT(done.seconds, 10) << done.describe();
  EXPECT_LT(done.max_rss_kb, baseline + 16 * 1024) << "baseline " << baseline << " KB\n" << done.describe();
  struct stat st {};
  ::stat(huge.c_str(), &st);
  std::cout << "[ info ] " << st.st_size << "-byte HDF5 file: exit "
            << done.exit_code << " in " << done.seconds << " s, peak RSS " << done.max_rss_kb << " KB\n";
  EXPECT_TRUE(list_dir(out).empty());
}

// ---------- MPI: a rank killed, mpirun terminated ----------

std::vector<std::string> mpiexec_command(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string f; flags >> f;) argv.push_back(f);
  return argv;
}

// Pids of live processes whose environment holds `tag` (and `rank_var` when given: then ranks
// only, not their cleanup watchers, "blockmm-cleanup", which share their environment).
// Every process of the job gone within `timeout` seconds (zombies have no environ and count as gone).
bool all_gone(const std::string& tag, double timeout) {
  const auto begin = Clock::now();
  while (!tagged_processes(tag).empty()) {
    if (since(begin) > timeout) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::string unique_tag() {
  std::random_device rd;
  return "BLOCKMM_FAULT_TAG=" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

class FaultMpi : public ::testing::TestWithParam<int> {};

// mpirun -np 3; once the run writes its output, rank `victim` is SIGKILLed. mpirun then ends the
// others (SIGTERM, and SIGKILL a second later): their handlers must remove the temporary file.
TEST_P(FaultMpi, RankKilledMidRunLeavesNothingAndDoesNotHang) {
  const int victim = GetParam();
  const LongCase& inputs = LongCase::get();
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/C.bin";
  write_text(target, kPrevious);
  const std::string tag = unique_tag();
  std::vector<std::string> argv = mpiexec_command(3);
  argv.push_back(blockmm_bin());
  for (const std::string& a : inputs.args(target)) argv.push_back(a);
  Child job(argv, {tag});
  const std::string temp = wait_for_temporary(job, out, "C.bin", 12, 180);
  ASSERT_FALSE(temp.empty()) << "the job ended before its temporary output held the header\n" << job.wait(10).describe();
  const std::vector<pid_t> ranks = tagged_processes(tag, "OMPI_COMM_WORLD_RANK=" + std::to_string(victim));
  ASSERT_EQ(ranks.size(), 1u) << "cannot find rank " << victim << "'s process";
  ASSERT_EQ(::kill(ranks[0], SIGKILL), 0);
  const Finished done = job.wait(90);
  EXPECT_FALSE(done.timed_out) << "the job hung after a rank died\n" << done.describe();
  EXPECT_NE(done.exit_code, 0) << done.describe();
  EXPECT_TRUE(all_gone(tag, 30)) << "ranks outlived mpirun";
  EXPECT_FALSE(path_exists(temp)) << "temporary file " << temp << " left behind\n" << done.describe();
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.bin"}) << done.describe();
  EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
}

INSTANTIATE_TEST_SUITE_P(Victims, FaultMpi, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int>& param) { return "Rank" + std::to_string(param.param); });

// SIGTERM to mpirun itself (a batch system's time limit, say): mpirun ends the ranks with SIGCONT
// and SIGTERM (SIGKILL a second later). The ranks are stopped first so that they cannot finish
// before that; but mpirun sometimes waits a second between its SIGCONT and its SIGTERM, and a
// fast machine then completes the run: a whole, committed output is correct too. Never a partial
// output or a temporary file.
TEST(FaultMpiLauncher, MpirunTerminatedLeavesNothing) {
  const LongCase& inputs = LongCase::get();
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  const std::string target = out + "/C.bin";
  const std::string tag = unique_tag();
  std::vector<std::string> argv = mpiexec_command(2);
  argv.push_back(blockmm_bin());
  for (const std::string& a : inputs.args(target)) argv.push_back(a);
  Child job(argv, {tag});
  const std::string temp = wait_for_temporary(job, out, "C.bin", 12, 180);
  ASSERT_FALSE(temp.empty()) << "the job ended before its temporary output held the header\n" << job.wait(10).describe();
  const std::vector<pid_t> ranks = tagged_processes(tag, "OMPI_COMM_WORLD_SIZE=2");
  ASSERT_EQ(ranks.size(), 2u) << "cannot find the ranks' processes";
  for (pid_t rank : ranks) ASSERT_EQ(::kill(rank, SIGSTOP), 0);
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  const Finished done = job.wait(90);
  EXPECT_FALSE(done.timed_out) << done.describe();
  EXPECT_NE(done.exit_code, 0) << done.describe();
  EXPECT_TRUE(all_gone(tag, 30)) << "ranks outlived mpirun";
  EXPECT_FALSE(path_exists(temp)) << "temporary file " << temp << " left behind\n" << done.describe();
  if (path_exists(target)) {
    OutputRecords product;
    EXPECT_EQ(load(target, product), "") << "a partial output was committed";
    EXPECT_GT(product.size(), 0);
    EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.bin"});
    std::cout << "[ info ] the ranks finished before mpirun ended them: whole output committed\n";
  } else {
    EXPECT_EQ(list_dir(out), std::vector<std::string>{}) << done.describe();
  }
}

}  // namespace
}  // namespace blockmm::e2e
