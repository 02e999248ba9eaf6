// comm::Communicator's error paths and node-shared memory under a real mpiexec -n 3
// (tests/comm/comm_probe.cpp): every failure ends every rank, promptly, with one agreed code and
// message. blockmm's own usage errors under mpiexec: tests/e2e/mpi/usage_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "support/harness.hpp"

namespace blockmm::e2e {
namespace {

std::vector<std::string> mpiexec(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string flag; flags >> flag;) argv.push_back(flag);
  return argv;
}

RunResult probe(const std::string& scenario, const std::vector<std::string>& env = {}, int ranks = 3) {
  std::vector<std::string> argv = mpiexec(ranks);
  argv.push_back(env_or("BLOCKMM_COMM_PROBE"));
  argv.push_back(scenario);
  RunOptions options;
  options.timeout_seconds = 60;  // a deadlock shows as a time-out
  options.set_env = env;
  return run_process(argv, options);
}

// The line rank `rank` printed for the "nodes" scenario.
std::string nodes_line(const RunResult& run, int rank) {
  const std::string head = "rank " + std::to_string(rank) + ": nodes ";
  for (const std::string& line : split_lines(run.out))
    if (line.rfind(head, 0) == 0) return line;
  return "(none)";
}

// Each of the 3 ranks printed "rank R: exit <code>: <message>".
::testing::AssertionResult every_rank_reported(const RunResult& run, int code, const std::string& message) {
  if (run.timed_out) return ::testing::AssertionFailure() << "the job hung\n" << run.describe();
  for (int r = 0; r < 3; ++r) {
    const std::string line = "rank " + std::to_string(r) + ": exit " + std::to_string(code) + ": " + message;
    const std::vector<std::string> lines = split_lines(run.out);
    if (std::find(lines.begin(), lines.end(), line) == lines.end())
      return ::testing::AssertionFailure() << "no line '" << line << "'\n" << run.describe();
  }
  return ::testing::AssertionSuccess();
}

TEST(Communicator, ExchangeDeliversEveryMessage) {
  const RunResult run = probe("exchange");
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(run.out.find("rank " + std::to_string(r) + ": exit 0"), std::string::npos) << run.describe();
}

// Node counters (shared memory of the node's ranks): threads of every rank claim at once, and
// each value is handed out exactly once; 1 rank and 3.
TEST(Communicator, NodeCountersHandOutEachValueOnce) {
  for (int ranks : {1, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const RunResult run = probe("counters", {}, ranks);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    for (int r = 0; r < ranks; ++r)
      EXPECT_NE(run.out.find("rank " + std::to_string(r) + ": exit 0"), std::string::npos) << run.describe();
  }
}

// Every rank of one mpiexec shares this machine: one node, led by rank 0, every rank on it.
TEST(Communicator, RanksOfOneMachineAreOneNode) {
  for (const char* setting : {"BLOCKMM_SIMULATE_NODES=", "BLOCKMM_SIMULATE_NODES=0"}) {
    SCOPED_TRACE(setting);
    for (int ranks : {2, 3}) {
      const RunResult run = probe("nodes", {setting}, ranks);
      ASSERT_EQ(run.exit_code, 0) << run.describe();
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(nodes_line(run, r), "rank " + std::to_string(r) + ": nodes 1 node 0 leader 0 machine " +
                                          std::to_string(ranks) + " same " + std::string(ranks, '1'))
            << run.describe();
    }
  }
}

// BLOCKMM_SIMULATE_NODES=1: each rank its own node (its own leader, the node numbered as the
// rank), while the machine's rank count, which cores are shared by, stays the real one.
TEST(Communicator, SimulatedNodesMakeEveryRankItsOwnNode) {
  for (int ranks : {2, 4}) {
    const RunResult run = probe("nodes", {"BLOCKMM_SIMULATE_NODES=1"}, ranks);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    for (int r = 0; r < ranks; ++r) {
      std::string same(static_cast<std::size_t>(ranks), '0');
      same[static_cast<std::size_t>(r)] = '1';
      EXPECT_EQ(nodes_line(run, r), "rank " + std::to_string(r) + ": nodes " + std::to_string(ranks) + " node " +
                                        std::to_string(r) + " leader " + std::to_string(r) + " machine " +
                                        std::to_string(ranks) + " same " + same + " simulated")
          << run.describe();
    }
  }
}

// Without MPI (a plain run) the one rank is one node, simulated or not.
TEST(Communicator, SingletonIsOneNodeOfOneRank) {
  for (const char* setting : {"BLOCKMM_SIMULATE_NODES=", "BLOCKMM_SIMULATE_NODES=1"}) {
    RunOptions options;
    options.set_env = {setting};
    const RunResult run = run_process({env_or("BLOCKMM_COMM_PROBE"), "nodes-single"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(nodes_line(run, 0), "rank 0: nodes 1 node 0 leader 0 machine 1 same 1") << run.describe();
  }
}

// Names in /dev/shm that start with "blockmm" (none may be made by the node's shared memory).
std::vector<std::string> blockmm_names_in_dev_shm() {
  std::vector<std::string> names;
  for (const std::string& name : list_dir("/dev/shm"))
    if (name.rfind("blockmm", 0) == 0) names.push_back(name);
  return names;
}

// The node's shared memory (comm/node_shared_memory.hpp): what the first rank writes, every rank
// reads, with no name in /dev/shm and no descriptor left once mapped. Where any rank of the node
// cannot open it or does not want it, or the node has one rank, every rank gets none.
TEST(Communicator, NodeSharedMemoryIsAnonymousAndAgreedByEveryRankOfTheNode) {
  const std::vector<std::string> before = blockmm_names_in_dev_shm();
  const auto every_rank_says = [](const RunResult& run, int ranks, const std::string& what) {
    for (int r = 0; r < ranks; ++r) {
      const std::string line = "rank " + std::to_string(r) + ": node memory " + what;
      const std::vector<std::string> lines = split_lines(run.out);
      if (std::find(lines.begin(), lines.end(), line) == lines.end())
        return ::testing::AssertionFailure() << "no line '" << line << "'\n" << run.describe();
    }
    if (run.exit_code != 0) return ::testing::AssertionFailure() << run.describe();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(every_rank_says(probe("node-memory", {}, 3), 3, std::to_string((3 << 20) + 5) + " bytes"));
  EXPECT_TRUE(every_rank_says(probe("node-memory", {}, 2), 2, std::to_string((3 << 20) + 5) + " bytes"));
  for (const char* refused : {"BLOCKMM_TEST_NODE_MEMORY=refuse=0", "BLOCKMM_TEST_NODE_MEMORY=refuse=2"}) {
    SCOPED_TRACE(refused);
    EXPECT_TRUE(every_rank_says(probe("node-memory", {refused}, 3), 3, "none"));
  }
  EXPECT_TRUE(every_rank_says(probe("node-memory-unwanted", {}, 3), 3, "none"));
  EXPECT_TRUE(every_rank_says(probe("node-memory", {"BLOCKMM_SIMULATE_NODES=1"}, 2), 2, "none"));
  EXPECT_TRUE(every_rank_says(probe("node-memory", {}, 1), 1, "none"));
  EXPECT_EQ(blockmm_names_in_dev_shm(), before);
}

TEST(Communicator, ExceptionOfUnknownTypeOnOneRankIsAgreedAsExitOne) {
  const RunResult run = probe("unknown");
  EXPECT_TRUE(every_rank_reported(run, 1, "internal error: an exception of unknown type"));
  EXPECT_EQ(run.exit_code, 1) << run.describe();
}

TEST(Communicator, ReceiveBufferOneRankCannotAllocateIsAgreedAsExitFive) {
  const RunResult run = probe("alloc");
  EXPECT_TRUE(every_rank_reported(run, 5, "out of memory"));
  EXPECT_EQ(run.exit_code, 5) << run.describe();
}

TEST(Communicator, FailingIsendEndsTheJobWithItsReasonInsteadOfHanging) {
  const RunResult run = probe("isend");
  EXPECT_FALSE(run.timed_out) << run.describe();
  EXPECT_NE(run.exit_code, 0) << run.describe();
  EXPECT_LT(run.exit_code, 128) << "a rank crashed\n" << run.describe();
  EXPECT_NE(run.err.find("blockmm: error: exchanging blocks between ranks failed: MPI_Isend"), std::string::npos)
      << run.describe();
}

}  // namespace
}  // namespace blockmm::e2e
