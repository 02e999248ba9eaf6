// The node's shared copy of B (comm/node_shared_memory.hpp) against a hostile or unlucky node,
// under a real mpiexec (issue 43): names that another user made in /dev/shm (those the shared B
// used to take, /dev/shm/blockmm-<pid of the node's first rank>-0) change nothing, and the run
// leaves nothing there; a rank that cannot open the memory makes every rank of the node keep a
// copy of its own, with the same product; files an earlier blockmm left in /dev/shm are removed
// once stale, and nothing else there. And names that are not UTF-8 go into the stats JSON under
// mpiexec as in a plain run.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct MpiRun {
  RunResult run;
  std::vector<int> rank_codes;  // each rank's own exit code (-1: none recorded)
  std::string describe() const {
    std::string codes;
    for (int c : rank_codes) codes += " " + std::to_string(c);
    return "rank exit codes:" + codes + "\n" + run.describe();
  }
  bool succeeded() const {
    return run.exit_code == 0 && !run.timed_out &&
           std::all_of(rank_codes.begin(), rank_codes.end(), [](int c) { return c == 0; });
  }
};

// mpiexec -n `ranks` blockmm `args` through tests/e2e/mpi/mpirun_blockmm.sh (a 60 s guard inside it).
MpiRun run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  ScratchDir status("blockmm-mpi-status");
  std::vector<std::string> argv{"bash", env_or("BLOCKMM_MPI_SCRIPT"), std::to_string(ranks), status.path()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options;
  options.timeout_seconds = 100;
  options.set_env = env;
  MpiRun result;
  result.run = run_process(argv, options);
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(status / ("rank-" + std::to_string(r)));
    int code = -1;
    if (in) in >> code;
    result.rank_codes.push_back(code);
  }
  return result;
}

// Entries of /dev/shm whose names start with "blockmm".
std::vector<std::string> blockmm_names_in_dev_shm() {
  std::vector<std::string> names;
  for (const std::string& name : list_dir("/dev/shm"))
    if (name.rfind("blockmm", 0) == 0) names.push_back(name);
  return names;
}

// A pid that no longer exists: a child's, reaped.
pid_t finished_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// Files in /dev/shm made for the scope of a test (removed, where still there, at its end).
class DevShmFiles {
 public:
  DevShmFiles() = default;
  DevShmFiles(const DevShmFiles&) = delete;
  DevShmFiles& operator=(const DevShmFiles&) = delete;
  ~DevShmFiles() {
    for (const std::string& name : names_) ::unlink(("/dev/shm/" + name).c_str());
  }
  // Creates /dev/shm/`name` with `bytes` bytes, last modified `age` seconds ago; false where it exists.
  bool make(const std::string& name, std::size_t bytes = 0, int age = 0) {
    const std::string path = "/dev/shm/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    names_.push_back(name);
    const std::string data(bytes, 'x');
    const bool written = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    const struct timespec times[2] = {{std::time(nullptr) - age, 0}, {std::time(nullptr) - age, 0}};
    const bool dated = ::futimens(fd, times) == 0;
    ::close(fd);
    return written && dated;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
};

class NodeMemory : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-node-memory"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");
  std::string a = in_dir + "/a.bin";
  std::string b = in_dir + "/b.bin";
  std::vector<std::byte> expected;  // A x B from the oracle
  std::int64_t b_records = 0;

  // Dense enough that every rank's A rows reach every row of B: the node's ranks share B.
  void SetUp() override {
    std::mt19937_64 rng(4343);
    testing::RandomSpec spec;
    spec.n = 8 * 40;
    spec.m = 8;
    spec.density = 0.5;
    spec.zero_block_fraction = 0.05;
    const InputRecords ra = testing::random_blocks(spec, rng), rb = testing::random_blocks(spec, rng);
    write_bytes(a, encode(ra));
    write_bytes(b, encode(rb));
    expected = encode(sparse_oracle(ra, rb));
    b_records = rb.size();
  }

  // Every rank succeeded with the oracle's product; the JSON of --stats=json.
  nlohmann::json product_and_stats(const MpiRun& m, const std::string& out) {
    EXPECT_TRUE(m.succeeded()) << m.describe();
    EXPECT_TRUE(read_bytes(out) == expected) << "not the product\n" << m.describe();
    nlohmann::json j;
    EXPECT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.describe();
    std::remove(out.c_str());
    return j;
  }
};

// Another user fills /dev/shm with the names the shared B used to take
// (/dev/shm/blockmm-<pid>-0 for the next 10 000 pids): the ranks still share B, and neither
// those files nor any new one is touched or left. Before, the node's first rank failed to create
// its name and every rank exited 5.
TEST_F(NodeMemory, NamesTakenInDevShmChangeNothing) {
  const std::vector<std::string> before = blockmm_names_in_dev_shm();
  long pid_max = 32768;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  DevShmFiles taken;
  const long next = finished_pid();
  for (long k = 1; k <= 10000; ++k) (void)taken.make("blockmm-" + std::to_string((next + k) % pid_max) + "-0");
  ASSERT_GT(taken.names().size(), 9000u) << "could not make the names";
  const std::string out = out_dir + "/C.bin";
  const MpiRun m = run_mpi(2, {"-q", "--threads", "1", "--stats=json", a, b, out});
  const nlohmann::json j = product_and_stats(m, out);
  EXPECT_TRUE(j.value("b_shared_on_node", false)) << m.describe();
  std::vector<std::string> after = blockmm_names_in_dev_shm(), expected_names = before;
  expected_names.insert(expected_names.end(), taken.names().begin(), taken.names().end());
  std::sort(after.begin(), after.end());
  std::sort(expected_names.begin(), expected_names.end());
  EXPECT_TRUE(after == expected_names) << "a file in /dev/shm was made or removed";
}

// A rank of the node that cannot open the memory (the first rank, another, the last), as where
// /proc is not mounted: every rank of the node keeps its own B, reads all of it, and the product
// is the same.
TEST_F(NodeMemory, RankThatCannotOpenTheMemoryMakesEveryRankKeepItsOwnB) {
  for (const std::string refused : {"0", "1", "2"}) {
    SCOPED_TRACE("rank " + refused + " refused");
    const std::string out = out_dir + "/C.bin";
    const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--stats=json", a, b, out},
                             {"BLOCKMM_TEST_NODE_MEMORY=refuse=" + refused});
    const nlohmann::json j = product_and_stats(m, out);
    EXPECT_FALSE(j.value("b_shared_on_node", true)) << m.describe();
    for (const nlohmann::json& rank : j.at("per_rank")) EXPECT_EQ(rank.at("b_records").get<std::int64_t>(), b_records);
  }
  // And without the refusal, the same ranks share it.
  const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--stats=json", a, b, out_dir + "/C.bin"});
  EXPECT_TRUE(product_and_stats(m, out_dir + "/C.bin").value("b_shared_on_node", false));
}

// What blockmm before issue 43 could leave in /dev/shm (a SIGKILL between creating its shared B
// and unlinking it): removed by the next sharing run, and said, where it is ours, its process is
// gone and it is over a minute old. A live process's, a fresh one and other names stay.
TEST_F(NodeMemory, StaleFilesOfEarlierRunsInDevShmAreRemoved) {
  const std::string dead = std::to_string(finished_pid());
  DevShmFiles files;
  const std::string stale = "blockmm-" + dead + "-0", fresh = "blockmm-" + dead + "-1";
  const std::string live = "blockmm-" + std::to_string(::getpid()) + "-0";
  const std::string other = "blockmm-" + dead + "-x";
  ASSERT_TRUE(files.make(stale, std::size_t{1} << 20, 600));
  ASSERT_TRUE(files.make(fresh, 10, 0));
  ASSERT_TRUE(files.make(live, 10, 600));
  ASSERT_TRUE(files.make(other, 10, 600));
  const std::string out = out_dir + "/C.bin";
  const MpiRun m = run_mpi(2, {"-q", "--threads", "1", "--stats=json", a, b, out});
  EXPECT_TRUE(product_and_stats(m, out).value("b_shared_on_node", false));
  EXPECT_FALSE(path_exists("/dev/shm/" + stale)) << m.describe();
  EXPECT_NE(m.run.err.find("note: removed /dev/shm/" + stale + " (1 MiB)"), std::string::npos) << m.describe();
  for (const std::string& kept : {fresh, live, other}) EXPECT_TRUE(path_exists("/dev/shm/" + kept)) << kept;
}

// Names that are not UTF-8 under mpiexec (issue 43, item 10): the run succeeds on every rank, the
// old output is replaced by the product, and both JSON texts carry the names (each byte that is
// not UTF-8 as the character of the same number). Before, rank 0 threw after the commit.
using MpiStats = NodeMemory;  // the same inputs

TEST_F(MpiStats, NamesThatAreNotUtf8GoIntoTheStats) {
  const std::string odd = "\xfe\x80", shown = "\xc3\xbe\xc2\x80";
  const std::string odd_b = in_dir + "/b" + odd + ".bin", out = out_dir + "/C" + odd + ".bin";
  const std::string stats = out_dir + "/S" + odd + ".json";
  write_bytes(odd_b, read_bytes(b));
  write_text(out, "the previous output\n");
  const MpiRun m = run_mpi(2, {"-q", "--threads", "1", "--stats=json", "--stats-file", stats, a, odd_b, out});
  ASSERT_TRUE(m.succeeded()) << m.describe();
  EXPECT_TRUE(read_bytes(out) == expected);
  for (const std::string& text : {m.run.out, slurp(stats)}) {
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << text;
    EXPECT_EQ(j.at("output").get<std::string>(), out_dir + "/C" + shown + ".bin");
    EXPECT_EQ(j.at("inputs").at(1).at("path").get<std::string>(), in_dir + "/b" + shown + ".bin");
    EXPECT_EQ(j.at("ranks").get<int>(), 2);
  }
  EXPECT_EQ(list_dir(out_dir), (std::vector<std::string>{"C" + odd + ".bin", "S" + odd + ".json"}));
}

}  // namespace
}  // namespace blockmm::e2e
