// blockmm's usage errors under mpiexec: every rank finds the same error, a usage error's message
// is never lost when the launcher tears the job down, srun tasks that MPI sees as singletons are
// told how to launch, and an empty operand still gives the empty product on every rank.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <sstream>
#include <tuple>

#include "support/harness.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

#ifdef BLOCKMM_TEST_ASAN
constexpr int kUsageRounds = 2;
#else
constexpr int kUsageRounds = 8;
#endif

std::vector<std::string> mpiexec(int ranks) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string flag; flags >> flag;) argv.push_back(flag);
  return argv;
}

// Every rank of `mpiexec -n 3 blockmm` finds the same usage error. Rank 0 alone prints it, and
// the launcher ends the job at the first rank that exits non-zero: rank 0's message used to be
// lost in 1-3% of runs. Repeated, each run must show the message exactly once and exit 2.
TEST(MpiUsage, UsageErrorMessageIsNeverLostUnderMpiexec) {
  ScratchDir dir("blockmm-mpi-usage");
  const std::string out_dir = dir.subdir("out");
  const std::vector<std::vector<std::string>> cases = {
      {"--threads", "50000", "A.bin", "B.bin", out_dir + "/C.bin"},
      {"--no-such-option", "A.bin", "B.bin", out_dir + "/C.bin"},
  };
  // About 1 s a run; under ASan MPI_Init alone takes seconds, so fewer rounds there.
  for (int round = 0; round < kUsageRounds; ++round) {
    for (const auto& args : cases) {
      std::vector<std::string> argv = mpiexec(3);
      argv.push_back(blockmm_bin());
      argv.insert(argv.end(), args.begin(), args.end());
      RunOptions options;
      options.timeout_seconds = 60;
      const RunResult run = run_process(argv, options);
      SCOPED_TRACE("round " + std::to_string(round) + ": " + args[0]);
      EXPECT_EQ(run.exit_code, 2) << run.describe();
      int lines = 0;
      for (const std::string& line : split_lines(run.err)) lines += line.rfind("blockmm: error: ", 0) == 0;
      EXPECT_EQ(lines, 1) << run.describe();
      EXPECT_TRUE(list_dir(out_dir).empty());
    }
  }
}

// srun without PMI support starts each task as a singleton: every process believes it is the only
// rank. The step's task count (comm/launcher.hpp) names the fix before any output exists.
TEST(MpiUsage, SrunTasksThatMpiSeesAsOneRankEachAreTold) {
  ScratchDir dir("blockmm-mpi-srun");
  const std::string out_dir = dir.subdir("out");
  const std::string a = dir / "A.bin";
  write_bytes(a, encode(make_records(64, 4, {{1, 2, std::vector<std::uint16_t>(16, 3)}})));
  RunOptions options;
  options.timeout_seconds = 60;
  options.set_env = {"SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=0"};
  const RunResult run = run_process({blockmm_bin(), a, a, out_dir + "/C.bin"}, options);
  EXPECT_EQ(run.exit_code, 2) << run.describe();
  EXPECT_NE(run.err.find("blockmm: error: srun started 2 tasks but MPI sees one rank: launch with srun --mpi=pmix"),
            std::string::npos)
      << run.describe();
  EXPECT_TRUE(list_dir(out_dir).empty());
}

// An empty operand under mpiexec -n 3: the empty product (header only) without building
// anything, and a duplicate in the other operand, whose two records are read by different
// ranks, found through the keys the ranks exchange: exit 3 on every rank, one message.
TEST(MpiUsage, EmptyOperandGivesTheEmptyProductAndStillFindsDuplicates) {
  ScratchDir dir("blockmm-mpi-empty");
  const std::string out_dir = dir.subdir("out");
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  const std::string empty = dir / "empty.bin", some = dir / "some.bin", twice = dir / "twice.bin";
  write_bytes(empty, encode_with_header(64, 4, 0, {}));
  write_bytes(some, encode(make_records(64, 4, {{1, 2, fill(3)}, {4, 5, fill(1)}, {15, 0, fill(9)}})));
  // (4, 5) at records 1 and 4 of 5: with 3 ranks reading 1, 2 and 2 records, on ranks 0 and 2.
  std::vector<std::byte> records;
  for (const auto& [i, j, v] : std::vector<std::tuple<std::int32_t, std::int32_t, std::uint16_t>>{
           {1, 2, 3}, {4, 5, 1}, {3, 3, 1}, {7, 7, 1}, {4, 5, 2}}) {
    const std::vector<std::byte> one = encode(make_records(64, 4, {{i, j, fill(v)}}));
    records.insert(records.end(), one.begin() + 12, one.end());
  }
  write_bytes(twice, encode_with_header(64, 4, 5, records));
  RunOptions options;
  options.timeout_seconds = 60;
  for (const auto& [a, b] : {std::pair<std::string, std::string>{empty, some}, {some, empty}}) {
    std::vector<std::string> argv = mpiexec(3);
    for (const std::string& arg : {blockmm_bin(), std::string("-q"), a, b, out_dir + "/C.bin"}) argv.push_back(arg);
    const RunResult run = run_process(argv, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(read_bytes(out_dir + "/C.bin"), encode_with_header(64, 4, 0, {}));
    EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
    std::remove((out_dir + "/C.bin").c_str());
  }
  std::vector<std::string> argv = mpiexec(3);
  for (const std::string& arg : {blockmm_bin(), std::string("-q"), empty, twice, out_dir + "/C.bin"}) argv.push_back(arg);
  const RunResult run = run_process(argv, options);
  EXPECT_EQ(run.exit_code, 3) << run.describe();
  int lines = 0;
  for (const std::string& line : split_lines(run.err))
    if (line.rfind("blockmm: error: ", 0) == 0) {
      ++lines;
      EXPECT_EQ(line, "blockmm: error: " + twice + ": duplicate block (4, 5) at records 1 and 4 (byte offsets 52 and 172)");
    }
  EXPECT_EQ(lines, 1) << run.describe();
  EXPECT_TRUE(list_dir(out_dir).empty());
}

// `--batch -` under mpirun hung for ever: mpirun gives standard input to rank 0 alone, the other
// ranks read an empty batch and waited in a barrier while rank 0 entered the product (issue 52,
// item 4); `--batch /dev/stdin` and a FIFO alike (each rank waited on the FIFO). With two ranks
// each is refused in one line, exit 2, before anything is read or written (a deadline makes a
// regression fail instead of hanging); a regular batch file, and `--batch -` with one rank, run.
TEST(MpiUsage, BatchFromStandardInputOrAPipeIsRefusedNotHung) {
  ScratchDir dir("blockmm-mpi-batch");
  const std::string out_dir = dir.subdir("out");
  const std::string a = dir / "A.bin", batch = dir / "batch.txt", fifo = dir / "batch.fifo";
  write_bytes(a, encode(make_records(64, 4, {{1, 2, std::vector<std::uint16_t>(16, 3)}})));
  write_text(batch, a + " " + a + " " + out_dir + "/C.bin\n");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  RunOptions options;
  options.timeout_seconds = 30;  // a run takes about a second; ASan's MPI_Init a few
  const auto piped = [&](int ranks, const std::string& batch_name) {
    std::string command = "exec";
    for (const std::string& word : mpiexec(ranks)) command += " '" + word + "'";
    command += " '" + blockmm_bin() + "' -q --batch '" + batch_name + "' < '" + batch + "'";
    return run_process({"sh", "-c", command}, options);
  };
  for (const std::string& name : {std::string("-"), std::string("/dev/stdin"), fifo}) {
    SCOPED_TRACE(name);
    const RunResult run = piped(2, name);
    EXPECT_FALSE(run.timed_out) << "the ranks hung\n" << run.describe();
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    int lines = 0;
    for (const std::string& line : split_lines(run.err))
      lines += line.rfind("blockmm: error: --batch " + name + ": ", 0) == 0 &&
               line.find("every rank can read") != std::string::npos;
    EXPECT_EQ(lines, 1) << run.describe();
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
  const RunResult file = piped(2, batch);
  EXPECT_EQ(file.exit_code, 0) << file.describe();
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
  std::remove((out_dir + "/C.bin").c_str());
  const RunResult one_rank = piped(1, "-");
  EXPECT_EQ(one_rank.exit_code, 0) << one_rank.describe();
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
}

}  // namespace
}  // namespace blockmm::e2e
