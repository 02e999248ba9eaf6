// Faults under mpirun, against the real blockmm executable (label "fault"): a stats file or a
// file-size limit that fails every rank before the commit, a rank SIGKILLed mid-run, and mpirun
// itself terminated. In every case no hang, no rank left running, no temporary file, and an
// existing output untouched.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "e2e/fault/fault_support.hpp"
#include "e2e/fault/processes.hpp"

namespace blockmm::e2e {
namespace {

// ---------- every rank fails before the commit ----------

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

// ---------- MPI: a rank killed, mpirun terminated ----------

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
