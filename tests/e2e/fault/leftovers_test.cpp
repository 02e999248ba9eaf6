// Nothing left behind where blockmm cannot clean up after itself (issue 43, items 5 and 12), with
// the real executable and a real mpiexec (label "fault"):
// - SIGKILL of blockmm alone: its watcher process (io/cleanup_watcher.hpp) removes the temporary
//   output; the existing output stays.
// - mpirun's second Ctrl-C (mpirun exits at once, and Open MPI _exits each rank without a
//   signal): no temporary output is left.
// - SIGKILL of the whole process group (the watcher too): the next run writing into that folder,
//   whatever its output, removes the leftover once it has been left unchanged for the margin
//   (10 minutes; the tests date files back), and nothing whose liveness lock is held: not a run of
//   another host with the same host tag, not a live run that a run in another PID namespace
//   cannot see (issue 52, item 1).
// - The node's first rank killed (SIGKILL, SIGTERM) while it holds the node's shared B
//   (BLOCKMM_TEST_NODE_MEMORY=pause stops it there): nothing in /dev/shm, ever.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "e2e/fault/fault_support.hpp"
#include "e2e/fault/processes.hpp"
#include "support/harness.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

const char* kPrevious = "the previous output, which a failed run must leave alone\n";

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& entry : list_dir(dir))
    if (entry.find(".blockmm-tmp.") != std::string::npos) found.push_back(dir + "/" + entry);
  return found;
}

// Polls until a temporary output in `dir` holds at least `bytes` bytes (12: the header, the
// numeric phase has begun); "" when the child exits first or `timeout` passes.
std::string wait_for_temporary(Child& child, const std::string& dir, std::int64_t bytes, double timeout) {
  const auto begin = Clock::now();
  while (since(begin) < timeout) {
    for (const std::string& t : temporaries(dir)) {
      struct stat st {};
      if (::stat(t.c_str(), &st) == 0 && st.st_size >= bytes) return t;
    }
    if (child.exited()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return "";
}

// What a live run holds on its temporary (io/stale_temporaries.hpp): an open file description lock
// on byte 2^62. Held until the object goes.
class LivenessLock {
 public:
  explicit LivenessLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CLOEXEC)) {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = off_t{1} << 62;
    lock.l_len = 1;
    held_ = fd_ >= 0 && ::fcntl(fd_, F_OFD_SETLK, &lock) == 0;
  }
  ~LivenessLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  LivenessLock(const LivenessLock&) = delete;
  LivenessLock& operator=(const LivenessLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// Whether `path` is gone within `timeout` seconds (a watcher removes it once its process is gone).
bool gone_within(const std::string& path, double timeout) {
  const auto begin = Clock::now();
  while (path_exists(path)) {
    if (since(begin) > timeout) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

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
  return "BLOCKMM_LEFTOVERS_TAG=" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

std::vector<std::string> mpiexec_command(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string f; flags >> f;) argv.push_back(f);
  return argv;
}

// Entries of /dev/shm whose names start with "blockmm".
std::vector<std::string> blockmm_names_in_dev_shm() {
  std::vector<std::string> names;
  for (const std::string& name : list_dir("/dev/shm"))
    if (name.rfind("blockmm", 0) == 0) names.push_back(name);
  return names;
}

// Open MPI's own shared-memory files ("vader_segment.*" in /dev/shm), which a job it cannot end
// in order leaves behind (mpirun gone at once, a rank killed): those that appear while the test's
// job runs are removed when the test ends, so that the test leaves nothing behind either.
class OpenMpiLeftovers {
 public:
  OpenMpiLeftovers() : before_(names()) {}
  ~OpenMpiLeftovers() {
    for (const std::string& name : names())
      if (std::find(before_.begin(), before_.end(), name) == before_.end()) ::unlink(("/dev/shm/" + name).c_str());
  }
  OpenMpiLeftovers(const OpenMpiLeftovers&) = delete;
  OpenMpiLeftovers& operator=(const OpenMpiLeftovers&) = delete;

 private:
  static std::vector<std::string> names() {
    std::vector<std::string> found;
    for (const std::string& name : list_dir("/dev/shm"))
      if (name.rfind("vader_segment.", 0) == 0) found.push_back(name);
    return found;
  }
  std::vector<std::string> before_;
};

// Inputs from blockmm-gen: n = `n`, m = 4, `density` of the blocks.
class GeneratedInputs {
 public:
  GeneratedInputs(const std::string& n, const std::string& density) : dir_("blockmm-leftovers-inputs") {
    const std::string gen = env_or("BLOCKMM_BUILD_DIR") + "/blockmm-gen";
    for (const auto& [name, seed] : {std::pair<const char*, const char*>{"A.bin", "1"}, {"B.bin", "2"}}) {
      const RunResult run = run_process({gen, "--n", n, "--m", "4", "--density", density, "--seed", seed,
                                         "--max-value", "1023", "--quiet", dir_ / name});
      if (run.exit_code != 0) throw std::runtime_error("blockmm-gen failed: " + run.describe());
    }
  }
  std::string a() const { return dir_ / "A.bin"; }
  std::string b() const { return dir_ / "B.bin"; }

 private:
  ScratchDir dir_;
};

// A run long enough to be interrupted: about 3 s on the reference backend with one thread (n =
// 4096) on a 2-core VM, and in every one of two ranks twice that at n = 8192. Under
// AddressSanitizer (-O1) a fourth of the block products: n halved.
#if defined(BLOCKMM_TEST_ASAN)
constexpr const char* kPlainN = "2048";
constexpr const char* kTwoRankN = "4096";
#else
constexpr const char* kPlainN = "4096";
constexpr const char* kTwoRankN = "8192";
#endif

std::vector<std::string> slow_run(const GeneratedInputs& in, const std::string& out) {
  return {in.a(), in.b(), out, "--backend", "reference", "--threads", "1", "--quiet"};
}

// ---------- SIGKILL, and what any later run removes ----------

// kill -9 of blockmm alone (as the OOM killer does): its watcher removes the temporary output.
TEST(Leftovers, SigkillOfTheProcessAloneLeavesNoTemporary) {
  const GeneratedInputs inputs(kPlainN, "0.05");
  ScratchDir dir("blockmm-leftovers");
  const std::string out = dir.subdir("out");
  write_text(out + "/C.bin", kPrevious);
  const std::string tag = unique_tag();
  std::vector<std::string> argv{blockmm_bin()};
  for (const std::string& arg : slow_run(inputs, out + "/C.bin")) argv.push_back(arg);
  Child child(argv, {tag});
  const std::string temp = wait_for_temporary(child, out, 12, 120);
  ASSERT_FALSE(temp.empty()) << "the run ended before its temporary output held the header\n" << child.describe();
  ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
  const Finished killed = child.wait(30);
  EXPECT_FALSE(killed.timed_out);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(gone_within(temp, 10)) << "temporary file " << temp << " left behind";
  EXPECT_TRUE(all_gone(tag, 10)) << "the watcher outlived its work";
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"C.bin"});
  EXPECT_EQ(slurp(out + "/C.bin"), kPrevious) << "the existing output was changed";
}

// SIGKILL of the whole process group (the watcher too) leaves the temporary output. The next run
// writing anything into that folder removes it once it is older than the margin, and says so: not
// only a run on the same output. A temporary of a live process, a recent one of another host, one
// whose lock is held (another host's run, even one with this host's tag and a dead process id:
// a run in another PID namespace), an unmarked one (a run of a blockmm from before the lock, which
// took none, or one whose lock was refused) and files that only look alike stay; an old unlocked
// marked one of another host goes.
TEST(Leftovers, AnyRunInTheFolderRemovesStaleTemporaries) {
  const GeneratedInputs inputs(kPlainN, "0.05");
  ScratchDir dir("blockmm-leftovers");
  const std::string out = dir.subdir("out");
  std::vector<std::string> argv{blockmm_bin()};
  for (const std::string& arg : slow_run(inputs, out + "/X.bin")) argv.push_back(arg);
  Child child(argv);
  const std::string temp = wait_for_temporary(child, out, 12, 120);
  ASSERT_FALSE(temp.empty()) << child.describe();
  ASSERT_EQ(::kill(-child.pid(), SIGKILL), 0);
  child.wait(30);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(path_exists(temp)) << "SIGKILL of the process group cannot be cleaned up: the file should be there";
  ASSERT_TRUE(date_back(temp, 700));
  // ".X.bin.blockmm-tmp.lk.<host>.<pid>.<random>": the host as blockmm names it.
  const std::string marker = ".blockmm-tmp.lk.";
  ASSERT_NE(temp.find(marker), std::string::npos) << temp << " is not marked as held by its lock";
  const std::size_t host_at = temp.find(marker) + marker.size();
  const std::string host = temp.substr(host_at, temp.find('.', host_at) - host_at);
  const std::string dead = std::to_string(child.pid());
  const std::vector<std::string> kept = {
      ".Z.bin.blockmm-tmp.lk." + host + "." + std::to_string(::getpid()) + ".abcdef",  // a live process's
      ".Z.bin.blockmm-tmp.lk.not" + host + "." + dead + ".abcdef",                     // another host's, recent
      ".Z.bin.blockmm-tmp.lk." + host + "." + dead + ".abc",                           // not blockmm's name
      "Z.bin.blockmm-tmp.lk." + host + "." + dead + ".abcdef",                         // not hidden
      ".U.bin.blockmm-tmp.node1." + dead + ".abcdef",  // unmarked: an older blockmm's run, perhaps live
  };
  const std::vector<std::string> locked = {
      ".W.bin.blockmm-tmp.lk.node1." + dead + ".abcdef",        // another host's live run (its tag node1)
      ".W.bin.blockmm-tmp.lk." + host + "." + dead + ".abcdef",  // a live run this one cannot see
  };
  const std::string dead_elsewhere = out + "/.V.bin.blockmm-tmp.lk.node1." + dead + ".abcdef";
  for (const std::string& name : kept) write_text(out + "/" + name, "someone else's\n");
  for (const std::string& name : locked) write_text(out + "/" + name, "a live run's partial output\n");
  write_text(dead_elsewhere, "a dead run's partial output\n");
  for (const std::string& name : kept)
    ASSERT_TRUE(date_back(out + "/" + name, name.find(".not") != std::string::npos ? 60 : 700));
  for (const std::string& name : locked) ASSERT_TRUE(date_back(out + "/" + name, 700));
  ASSERT_TRUE(date_back(dead_elsewhere, 700));
  const LivenessLock live_elsewhere(out + "/" + locked[0]), live_unseen(out + "/" + locked[1]);
  ASSERT_TRUE(live_elsewhere.held() && live_unseen.held());
  const RunResult next = run_blockmm({"--quiet", inputs.a(), inputs.b(), out + "/Y.bin", "--threads", "1"});
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_FALSE(path_exists(temp)) << "the stale temporary of X.bin was not removed by a run writing Y.bin";
  EXPECT_NE(next.err.find("note: removed " + temp + ", the temporary output of a run (process " + dead + ")"),
            std::string::npos)
      << next.describe();
  EXPECT_FALSE(path_exists(dead_elsewhere)) << "an old unlocked temporary of another host was left";
  std::vector<std::string> expected = kept;
  expected.insert(expected.end(), locked.begin(), locked.end());
  expected.push_back("Y.bin");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(list_dir(out), expected);
}

// A live run beside a run started in another PID namespace (a container on this host sharing the
// folder: there the live run's process id names no process). The live run's temporaries (its
// product's; a parted output's main file and parts; two ranks' parts, each held by the rank that
// made it) are dated back past the margin, so that only their liveness locks keep them. The live
// run must finish with its output in place: it failed at its rename (exit 4) when the sweep
// judged by process ids alone (issue 52, item 1).
struct LiveRun {
  const char* name;
  const char* output;
  int ranks;
  std::size_t temporaries;  // the product's, and its parts'
  std::vector<std::string> options;
};

class LeftoversLiveRun : public ::testing::TestWithParam<LiveRun> {};

TEST_P(LeftoversLiveRun, RunInAnotherPidNamespaceLeavesItsTemporariesAlone) {
  const LiveRun& live = GetParam();
  if (run_process({"unshare", "-p", "-f", "--mount-proc", "true"}).exit_code != 0)
    GTEST_SKIP() << "unshare -p -f --mount-proc is not allowed here (it needs root or user namespaces)";
  const GeneratedInputs inputs(kPlainN, "0.05");
  ScratchDir dir("blockmm-leftovers");
  const std::string out = dir.subdir("out");
  const std::string small = dir / "S.bin";
  write_bytes(small, encode(make_records(64, 4, {{1, 2, std::vector<std::uint16_t>(16, 3)}})));
  std::vector<std::string> argv = live.ranks > 1 ? mpiexec_command(live.ranks) : std::vector<std::string>{};
  argv.push_back(blockmm_bin());
  for (const std::string& arg : slow_run(inputs, out + "/" + live.output)) argv.push_back(arg);
  argv.insert(argv.end(), live.options.begin(), live.options.end());
  Child child(argv);
  const auto begin = Clock::now();
  while (temporaries(out).size() < live.temporaries && !child.exited() && since(begin) < 120)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::vector<std::string> held = temporaries(out);
  ASSERT_EQ(held.size(), live.temporaries) << "the run ended before it made its temporaries\n" << child.describe();
  for (const std::string& temp : held) ASSERT_TRUE(date_back(temp, 700));
  const RunResult beside =
      run_process({"unshare", "-p", "-f", "--mount-proc", blockmm_bin(), "--quiet", small, small, out + "/Y.bin"});
  EXPECT_EQ(beside.exit_code, 0) << beside.describe();
  EXPECT_EQ(beside.err.find("note: removed"), std::string::npos) << beside.describe();
  ASSERT_FALSE(child.exited()) << "the live run ended before the sweep beside it (make the case bigger)";
  for (const std::string& temp : held) EXPECT_TRUE(path_exists(temp)) << temp << " of the live run was removed";
  const Finished done = child.wait(180);
  EXPECT_EQ(done.exit_code, 0) << "the live run lost its output\n" << child.describe();
  EXPECT_TRUE(path_exists(out + "/" + live.output));
  EXPECT_TRUE(temporaries(out).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Outputs, LeftoversLiveRun,
    ::testing::Values(LiveRun{"binary", "X.bin", 1, 1, {}}, LiveRun{"parted", "X.h5", 1, 3, {"--parts", "2"}},
                      LiveRun{"two_ranks_parted", "X.h5", 2, 3, {"--parts", "2"}}),
    [](const ::testing::TestParamInfo<LiveRun>& param) { return std::string(param.param.name); });

// ---------- under mpirun ----------

// mpirun's first Ctrl-C asks the ranks to stop (SIGCONT, then SIGTERM a second later); a second
// Ctrl-C in that second makes mpirun exit at once, and Open MPI then _exits every rank (no signal,
// no handler). No temporary output may be left; a run that finished first has committed a whole
// output.
TEST(LeftoversMpi, DoubleCtrlCOfMpirunLeavesNoTemporary) {
  const GeneratedInputs inputs(kTwoRankN, "0.05");
  ScratchDir dir("blockmm-leftovers");
  const std::string out = dir.subdir("out");
  const std::string tag = unique_tag();
  const OpenMpiLeftovers open_mpi_files;
  std::vector<std::string> argv = mpiexec_command(2);
  argv.push_back(blockmm_bin());
  for (const std::string& arg : slow_run(inputs, out + "/C.bin")) argv.push_back(arg);
  Child job(argv, {tag});
  const std::string temp = wait_for_temporary(job, out, 12, 180);
  ASSERT_FALSE(temp.empty()) << "the job ended before its temporary output held the header\n" << job.describe();
  ASSERT_EQ(::kill(job.pid(), SIGINT), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::kill(job.pid(), SIGINT), 0);
  EXPECT_FALSE(job.wait(60).timed_out) << "mpirun hung";
  EXPECT_TRUE(all_gone(tag, 30)) << "ranks or their watchers outlived mpirun";
  EXPECT_TRUE(gone_within(temp, 10)) << "temporary file " << temp << " left behind\n" << job.describe();
  if (path_exists(out + "/C.bin")) {
    OutputRecords product;
    EXPECT_EQ(load(out + "/C.bin", product), "") << "a partial output was committed";
    std::cout << "[ info ] the ranks finished before mpirun ended them: whole output committed\n";
  }
  EXPECT_TRUE(temporaries(out).empty());
}

class LeftoversNodeMemory : public ::testing::TestWithParam<int> {};

// The node's first rank killed while it holds the node's shared B, allocated in full (the moment
// when blockmm before issue 43 had a file of that size in /dev/shm): the memory was anonymous
// (the rank holds a /memfd: descriptor, nothing new in /dev/shm), and nothing is left there
// after the job, nor in the output folder.
TEST_P(LeftoversNodeMemory, FirstRankKilledHoldingTheSharedBLeavesNothing) {
  const int sig = GetParam();
  const GeneratedInputs inputs("512", "0.5");  // dense: every rank needs all of B, which the node shares
  ScratchDir dir("blockmm-leftovers");
  const std::string out = dir.subdir("out");
  write_text(out + "/C.bin", kPrevious);
  const std::vector<std::string> before = blockmm_names_in_dev_shm();
  const std::string tag = unique_tag();
  const OpenMpiLeftovers open_mpi_files;
  std::vector<std::string> argv = mpiexec_command(2);
  for (const std::string& arg : {blockmm_bin(), inputs.a(), inputs.b(), out + "/C.bin", std::string("--threads"),
                                 std::string("1"), std::string("--quiet")})
    argv.push_back(arg);
  Child job(argv, {tag, "BLOCKMM_TEST_NODE_MEMORY=pause"});
  const auto begin = Clock::now();
  while (job.err().find("node-shared memory of") == std::string::npos && !job.exited() && since(begin) < 120)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(job.err().find("allocated; pausing"), std::string::npos) << "the first rank never paused\n" << job.describe();
  const std::vector<pid_t> first = tagged_processes(tag, "OMPI_COMM_WORLD_RANK=0");
  ASSERT_EQ(first.size(), 1u) << "cannot find rank 0's process";
  bool holds_memfd = false;
  for (const std::string& fd : list_dir("/proc/" + std::to_string(first[0]) + "/fd")) {
    char target[256] = {};
    const std::string link = "/proc/" + std::to_string(first[0]) + "/fd/" + fd;
    holds_memfd |= ::readlink(link.c_str(), target, sizeof target - 1) > 0 && std::string(target).rfind("/memfd:blockmm", 0) == 0;
  }
  EXPECT_TRUE(holds_memfd) << "the node's shared memory is not anonymous memory of the first rank";
  EXPECT_EQ(blockmm_names_in_dev_shm(), before) << "the node's shared memory has a name in /dev/shm";
  ASSERT_EQ(::kill(first[0], sig), 0);
  EXPECT_FALSE(job.wait(60).timed_out) << "the job hung after its first rank died";
  EXPECT_TRUE(all_gone(tag, 30)) << "ranks or their watchers outlived mpirun";
  EXPECT_EQ(blockmm_names_in_dev_shm(), before) << "the node's shared memory was left in /dev/shm";
  EXPECT_TRUE(temporaries(out).empty() || gone_within(temporaries(out).front(), 10)) << "a temporary output was left";
  EXPECT_EQ(slurp(out + "/C.bin"), kPrevious) << "the existing output was changed";
}

INSTANTIATE_TEST_SUITE_P(KillAndTerm, LeftoversNodeMemory, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(param.param == SIGKILL ? "SIGKILL" : "SIGTERM");
                         });

}  // namespace
}  // namespace blockmm::e2e
