// --stats under a real mpiexec: per-rank work and the imbalance, a balance by work rather than by
// rows on skewed inputs, and the settings blockmm gives MPI at its start on one node, yielding to
// the user's own.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "e2e/mpi/mpi_fixture.hpp"

namespace blockmm::e2e {
namespace {

struct Reported {
  double imbalance = 0;
  std::int64_t block_products = 0;
  std::vector<std::int64_t> rows, work;
};

// Parses the JSON stats and checks them against the work computed from the inputs.
void check_stats(const std::string& json_text, int ranks, const std::vector<std::int64_t>& row_work, Reported& out) {
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(json_text)) << json_text;
  EXPECT_EQ(j.at("ranks"), ranks);
  ASSERT_EQ(j.at("per_rank").size(), static_cast<std::size_t>(ranks));
  out.imbalance = j.at("imbalance").get<double>();
  out.block_products = j.at("block_products").get<std::int64_t>();
  std::vector<std::int64_t> bounds{0};
  for (int r = 0; r < ranks; ++r) {
    const auto& entry = j.at("per_rank")[static_cast<std::size_t>(r)];
    EXPECT_EQ(entry.at("rank"), r);
    out.rows.push_back(entry.at("block_rows").get<std::int64_t>());
    out.work.push_back(entry.at("work").get<std::int64_t>());
    bounds.push_back(bounds.back() + out.rows.back());
    ASSERT_TRUE(entry.at("seconds").at("total").is_number());
  }
  ASSERT_EQ(bounds.back(), static_cast<std::int64_t>(row_work.size())) << "block-rows do not add up to p";
  // Each rank's work is that of its contiguous range of rows.
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t expect =
        std::accumulate(row_work.begin() + bounds[r], row_work.begin() + bounds[r + 1], std::int64_t{0});
    EXPECT_EQ(out.work[r], expect) << "rank " << r;
  }
  const std::int64_t total = std::accumulate(row_work.begin(), row_work.end(), std::int64_t{0});
  EXPECT_EQ(out.block_products, total);
  EXPECT_NEAR(out.imbalance, imbalance_of(row_work, bounds), 1e-9);
}

TEST_F(Mpi, StatsReportPerRankWorkAndImbalance) {
  std::mt19937_64 rng(77);
  testing::RandomSpec spec;
  spec.n = 600;
  spec.m = 3;
  spec.density = 0.04;
  spec.zero_block_fraction = 0.1;  // zero blocks are records but not work
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::int64_t> work = row_products(a, b);
  const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE("mpiexec -n " + std::to_string(n));
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out_dir + "/C.bin"});
    ASSERT_TRUE(mpi_succeeded(m));
    Reported reported;
    check_stats(m.run.out, n, work, reported);
    EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == expected);
  }
  // Input moved: on one node nothing at all (each rank scans the files itself); between
  // simulated nodes record bytes (and row requests between nodes, none within one).
  for (const auto& env : kNodeModes) {
    const bool simulated = env.front() == "BLOCKMM_SIMULATE_NODES=1";
    SCOPED_TRACE(env.front());
    const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--stats=json", pa, pb, out_dir + "/C.bin"}, env);
    ASSERT_TRUE(mpi_succeeded(m));
    EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == expected);
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
    EXPECT_EQ(j.at("nodes"), simulated ? 3 : 1);
    EXPECT_EQ(j.at("nodes_simulated"), simulated);
    // The cpu backend never builds whole inputs (the cuda backend's path: tests/e2e/gpu).
    EXPECT_EQ(j.at("distribution"), simulated ? "records exchanged" : "rows scanned from the files");
    const auto& moved = j.at("input_bytes_moved");
    EXPECT_EQ(moved.at("within_node").at("records"), 0);
    if (simulated) {
      EXPECT_GT(moved.at("between_nodes").at("records").get<std::int64_t>(), 0);
      EXPECT_EQ(moved.at("within_node").at("index"), 0);
    } else {
      EXPECT_EQ(moved.at("between_nodes").at("records"), 0);
      EXPECT_EQ(moved.at("between_nodes").at("index"), 0);
      EXPECT_EQ(moved.at("within_node").at("index"), 0);
    }
  }
}

// comm/mpi_start.hpp: ranks that all share one node start Open MPI on its shared-memory layer
// and hwloc without its OpenCL plugin, unless the user named a transport or hwloc components;
// the product is the same either way, and a run without MPI sets nothing.
TEST_F(Mpi, StartSettingsOnOneNodeYieldToTheUsersOwn) {
  std::mt19937_64 rng(1717);
  const testing::RandomSpec spec = testing::random_spec(rng, 16);
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
  const RunResult version = run_process({env_or("BLOCKMM_BIN"), "--version"});
  ASSERT_EQ(version.exit_code, 0) << version.describe();
  const bool open_mpi = version.out.find("Open MPI") != std::string::npos;
  using Settings = std::vector<std::string>;
  const Settings shared_memory = open_mpi ? Settings{"OMPI_MCA_pml=ob1", "OMPI_MCA_osc=^ucx"} : Settings{};
  struct Case {
    std::vector<std::string> env;  // ctest's own environment names OMPI_MCA_pml and OMPI_MCA_osc
    Settings expected;
  };
  std::vector<Case> cases;
  Settings all{"HWLOC_COMPONENTS=-opencl"};
  all.insert(all.end(), shared_memory.begin(), shared_memory.end());
  cases.push_back({{"OMPI_MCA_pml=", "OMPI_MCA_osc=", "HWLOC_COMPONENTS="}, all});
  cases.push_back({{"HWLOC_COMPONENTS="}, {"HWLOC_COMPONENTS=-opencl"}});
  cases.push_back({{"OMPI_MCA_pml=", "OMPI_MCA_osc=", "HWLOC_COMPONENTS=-gl"}, shared_memory});
  cases.push_back({{"OMPI_MCA_pml=", "OMPI_MCA_osc=", "OMPI_MCA_btl=self,vader", "HWLOC_COMPONENTS=-gl"}, {}});
  for (const Case& c : cases) {
    for (int n : {1, 2}) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n) + " with " + ::testing::PrintToString(c.env));
      const std::string out = out_dir + "/C.bin";
      const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out}, c.env);
      ASSERT_TRUE(mpi_succeeded(m));
      EXPECT_TRUE(read_bytes(out) == expected);
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      EXPECT_EQ(j.at("start_settings").get<Settings>(), c.expected);
      std::remove(out.c_str());
    }
  }
  RunOptions plain_options;
  plain_options.set_env = {"OMPI_MCA_pml=", "HWLOC_COMPONENTS="};
  const RunResult plain =
      run_process({env_or("BLOCKMM_BIN"), "-q", "--stats=json", pa, pb, out_dir + "/C.bin"}, plain_options);
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == expected);
  EXPECT_EQ(nlohmann::json::parse(plain.out).at("start_settings").get<Settings>(), Settings{});
}

TEST_F(Mpi, SkewedRowsAreBalancedByWorkNotByRowCount) {
  std::mt19937_64 rng(2024);
  // n = 1024, m = 4: p = 256 rows; A's row i holds ~ 1500 / (i+1) blocks / H(256), row 0 ~ 245.
  const InputRecords a = skewed_blocks(1024, 4, 1.0, 1500, 1, 1023, rng);
  testing::RandomSpec uniform;
  uniform.n = 1024;
  uniform.m = 4;
  uniform.density = 6.0 / 256;
  uniform.max_value = 1023;
  uniform.zero_value_fraction = 0;
  const InputRecords b = testing::random_blocks(uniform, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::int64_t> work = row_products(a, b);
  const std::int64_t p = static_cast<std::int64_t>(work.size());
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("mpiexec -n " + std::to_string(n));
    std::vector<std::int64_t> equal_rows;
    for (int r = 0; r <= n; ++r) equal_rows.push_back(p * r / n);
    const double equal_imbalance = imbalance_of(work, equal_rows);
    // The premise: equal row counts would be badly unbalanced on this input.
    ASSERT_GT(equal_imbalance, 1.5);
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out_dir + "/C.bin"});
    ASSERT_TRUE(mpi_succeeded(m));
    Reported reported;
    check_stats(m.run.out, n, work, reported);
    // Well below: at most a third of the excess over perfect balance that equal rows give.
    EXPECT_LT(reported.imbalance - 1, (equal_imbalance - 1) / 3)
        << "reported " << reported.imbalance << ", equal rows " << equal_imbalance;
    EXPECT_LT(reported.imbalance, 1.25) << "equal rows " << equal_imbalance;
    // Rows are not split equally: the first rank holds far fewer rows than p / n.
    EXPECT_LT(reported.rows[0] * 2, p / n);
    RecordProperty("imbalance_" + std::to_string(n) + "_ranks",
                   std::to_string(reported.imbalance) + " (equal rows " + std::to_string(equal_imbalance) + ")");
  }
}

}  // namespace
}  // namespace blockmm::e2e
