// Faults against a parted HDF5 output (label "fault", docs/output.md): a rank SIGKILLed while
// the parts are written (mpirun -np 3 ends the others), SIGTERM to a plain run, a tmpfs too
// small for the new parts, and a SIGKILLed run's part temporaries, which the next run sweeps.
// In every case: no part, no temporary file, and the existing parted output and its parts
// exactly as they were.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "support/harness.hpp"
#include "e2e/fault/processes.hpp"

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

// A job in its own process group, its output captured, reaped with a deadline.
class Job {
 public:
  Job(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) : capture_("blockmm-parted-fault") {
    RunOptions options;
    options.strip_launcher_env = false;
    options.set_env = env;
    pid_ = spawn_process(argv, options, capture_ / "out", capture_ / "err");
  }
  ~Job() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  // The exit code (128 + signal), or -1 when the deadline passed (the group is then killed).
  int wait(double timeout) {
    const auto begin = Clock::now();
    while (!exited()) {
      if (since(begin) > timeout) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        reaped_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return exit_code_;
  }
  std::string err() const { return slurp(capture_ / "err"); }

 private:
  ScratchDir capture_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
};

std::vector<std::string> mpiexec_command(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string f; flags >> f;) argv.push_back(f);
  return argv;
}

// The temporaries of C.h5's parts in `dir` (".C.h5.part-...blockmm-tmp..."), largest first.
std::vector<std::string> part_temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& name : list_dir(dir))
    if (name.rfind(".C.h5.part-", 0) == 0 && name.find(".blockmm-tmp.") != std::string::npos) found.push_back(name);
  return found;
}

// Waits until the run has its part temporaries and writes values into them (one has grown past
// `bytes`); false when the job ends first or `timeout` passes.
bool wait_for_parts(Job& job, const std::string& dir, std::int64_t bytes, double timeout) {
  const auto begin = Clock::now();
  while (since(begin) < timeout && !job.exited()) {
    for (const std::string& name : part_temporaries(dir)) {
      struct stat st {};
      if (::stat((dir + "/" + name).c_str(), &st) == 0 && st.st_blocks * 512 >= bytes) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Every file of `dir` and its bytes.
using Listing = std::vector<std::pair<std::string, std::string>>;
Listing listing(const std::string& dir) {
  Listing out;
  for (const std::string& name : list_dir(dir)) out.emplace_back(name, slurp(dir + "/" + name));
  return out;
}

// Inputs whose product takes seconds on the reference backend with one thread (70 MB of
// output), and small ones for an existing parted output.
class Inputs {
 public:
  static Inputs& get() {
    static Inputs instance;
    return instance;
  }
  std::string long_a() const { return dir_ / "A.bin"; }
  std::string long_b() const { return dir_ / "B.bin"; }
  std::string small() const { return dir_ / "S.bin"; }

 private:
  Inputs() : dir_("blockmm-parted-fault-inputs") {
    const std::string gen = env_or("BLOCKMM_BUILD_DIR") + "/blockmm-gen";
    const std::vector<std::vector<std::string>> runs = {
        {gen, "--n", "4096", "--m", "4", "--density", "0.05", "--seed", "1", "--max-value", "1023", "-q", dir_ / "A.bin"},
        {gen, "--n", "4096", "--m", "4", "--density", "0.05", "--seed", "2", "--max-value", "1023", "-q", dir_ / "B.bin"},
        {gen, "--n", "64", "--m", "4", "--density", "0.2", "--seed", "3", "-q", dir_ / "S.bin"}};
    for (const auto& argv : runs) {
      const RunResult run = run_process(argv);
      if (run.exit_code != 0) throw std::runtime_error("blockmm-gen failed: " + run.describe());
    }
  }
  ScratchDir dir_;
};

// An existing parted output C.h5 of the small inputs, in `dir`; its listing.
Listing existing_parted_output(const std::string& dir) {
  const Inputs& inputs = Inputs::get();
  const RunResult run = run_blockmm({"-q", "--parts", "2", inputs.small(), inputs.small(), dir + "/C.h5"});
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  const Listing before = listing(dir);
  EXPECT_EQ(before.size(), 3u) << "expected C.h5 and two parts";
  return before;
}

std::vector<std::string> long_run(const std::string& target, const char* parts) {
  const Inputs& inputs = Inputs::get();
  // Chunks of 1 MB: the parts are written as the product is computed, a few seconds long.
  return {blockmm_bin(), inputs.long_a(), inputs.long_b(), target, "--backend", "reference", "--threads", "1",
          "--quiet", "--chunk-size", "1M", "--parts", parts};
}

TEST(FaultParted, RankKilledWhileThePartsAreWrittenLeavesTheExistingOutput) {
  ScratchDir dir("blockmm-parted-fault");
  const std::string out = dir.subdir("out");
  const Listing before = existing_parted_output(out);
  std::random_device rd;
  const std::string tag = "BLOCKMM_FAULT_TAG=" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  std::vector<std::string> argv = mpiexec_command(3);
  for (const std::string& a : long_run(out + "/C.h5", "6")) argv.push_back(a);
  Job job(argv, {tag});
  ASSERT_TRUE(wait_for_parts(job, out, 64 << 10, 180)) << "the job ended before writing its parts\n" << job.err();
  const std::vector<pid_t> victim = tagged_processes(tag, "OMPI_COMM_WORLD_RANK=2");
  ASSERT_EQ(victim.size(), 1u) << "cannot find rank 2's process";
  ASSERT_EQ(::kill(victim[0], SIGKILL), 0);
  const int code = job.wait(90);
  EXPECT_NE(code, -1) << "the job hung after a rank died\n" << job.err();
  EXPECT_NE(code, 0) << job.err();
  const auto begin = Clock::now();
  while (!tagged_processes(tag).empty() && since(begin) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(tagged_processes(tag).empty()) << "ranks outlived mpirun";
  EXPECT_TRUE(listing(out) == before) << "a part, a temporary file or a change was left\n" << job.err();
}

TEST(FaultParted, SigtermWhileThePartsAreWrittenLeavesTheExistingOutput) {
  ScratchDir dir("blockmm-parted-fault");
  const std::string out = dir.subdir("out");
  const Listing before = existing_parted_output(out);
  Job job(long_run(out + "/C.h5", "3"));
  ASSERT_TRUE(wait_for_parts(job, out, 64 << 10, 120)) << job.err();
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  EXPECT_EQ(job.wait(60), 128 + SIGTERM) << job.err();
  EXPECT_TRUE(listing(out) == before) << "a part, a temporary file or a change was left";
}

// SIGKILL of the process group (its watcher too) leaves the part temporaries; the next run on the same
// output removes those of processes that are gone (their liveness locks free, unchanged for the
// sweep's margin: dated back here), and says so.
TEST(FaultParted, SigkilledRunsPartTemporariesAreRemovedByTheNextRun) {
  ScratchDir dir("blockmm-parted-fault");
  const std::string out = dir.subdir("out");
  Job job(long_run(out + "/C.h5", "3"));
  ASSERT_TRUE(wait_for_parts(job, out, 64 << 10, 120)) << job.err();
  // The whole process group: blockmm's cleanup watcher would remove the temporaries of blockmm alone.
  ASSERT_EQ(::kill(-job.pid(), SIGKILL), 0);
  job.wait(30);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::vector<std::string> left = part_temporaries(out);
  ASSERT_EQ(left.size(), 3u) << "SIGKILL of the group cannot be cleaned up: the part temporaries should still be there";
  for (const std::string& name : list_dir(out)) ASSERT_TRUE(date_back(out + "/" + name, 700));
  const Inputs& inputs = Inputs::get();
  const RunResult next = run_blockmm({"-q", inputs.small(), inputs.small(), out + "/C.h5"});
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  for (const std::string& name : left) {
    EXPECT_FALSE(path_exists(out + "/" + name)) << name << " was not removed";
    EXPECT_NE(next.err.find("removed " + out + "/" + name), std::string::npos) << next.describe();
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.h5"});
}

// The new parts do not fit (a 64 KB tmpfs holding an existing parted output): exit 4, the
// existing output and its parts untouched, nothing else left.
TEST(FaultParted, TmpfsTooSmallForThePartsLeavesTheExistingOutput) {
  ScratchDir dir("blockmm-parted-fault");
  const std::string mnt = dir.subdir("mnt");
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (" << std::strerror(errno) << "): needs root";
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const Listing before = existing_parted_output(mnt);
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";  // 144 KB of product
  for (const char* threads : {"", "BLOCKMM_WRITE_THREADS=2"}) {
    SCOPED_TRACE(threads);
    RunOptions options;
    if (*threads != '\0') options.set_env = {threads};
    const RunResult run = run_blockmm({"-q", "--parts", "3", inputs + "/A.bin", inputs + "/B.bin", mnt + "/C.h5"}, options);
    EXPECT_EQ(run.exit_code, 4) << run.describe();
    EXPECT_EQ(split_lines(run.err).size(), 1u) << run.describe();
    EXPECT_TRUE(listing(mnt) == before) << "a part, a temporary file or a change was left";
  }
}

}  // namespace
}  // namespace blockmm::e2e
