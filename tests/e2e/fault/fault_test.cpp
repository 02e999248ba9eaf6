// Fault injection against the real blockmm executable while it runs (label "fault"): SIGTERM,
// SIGINT and SIGPIPE while the temporary output exists, a SIGKILLed run's leftover removed by the
// next run, and the temporary output swapped for a link. In every case: the documented exit code,
// no output or temporary file, an existing output untouched, no hang (every run has a deadline).
// Full devices and file-size limits: output_fault_test.cpp; unreadable and lying inputs:
// input_fault_test.cpp; mpirun: mpi_fault_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "e2e/fault/fault_support.hpp"

namespace blockmm::e2e {
namespace {

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
// process. The next run on the same output removes it (its liveness lock is free, and it has not
// changed for the sweep's margin: dated back here) and says so; a temporary file of a live process
// is left alone (tests/e2e/fault/leftovers_test.cpp: other outputs, other hosts, other PID namespaces).
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
  ASSERT_TRUE(date_back(temp, 700));
  // A live run's temporary (this test's own pid) must survive the sweep.
  const std::string pid = std::to_string(child.pid());
  const std::string live = temp.substr(0, temp.size() - 7 - pid.size()) + std::to_string(::getpid()) + ".abcdef";
  write_text(live, "a live run's partial output\n");
  ASSERT_TRUE(date_back(live, 700));

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

}  // namespace
}  // namespace blockmm::e2e
