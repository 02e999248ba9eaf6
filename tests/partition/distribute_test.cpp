// partition::distribute() under a real mpiexec (tests/partition/distribute_probe.cpp on 2-4
// ranks), with and without BLOCKMM_SIMULATE_NODES: every rank's operands equal the one-rank
// view of the files, ranks all on one node move nothing (no records, no row requests), simulated
// nodes move record bytes between them, and a duplicate in B stops every rank with the message
// a one-rank run gives.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

struct RankReport {
  bool ok = false;
  std::map<std::string, long long> values;  // "records-within" -> bytes, ...
  std::string line;
};

RunResult probe(int ranks, bool simulate, const std::string& a, const std::string& b, bool share_only = false) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", "mpiexec"), "-n", std::to_string(ranks)};
  std::istringstream flags(env_or("BLOCKMM_MPIEXEC_FLAGS"));
  for (std::string flag; flags >> flag;) argv.push_back(flag);
  argv.insert(argv.end(), {env_or("BLOCKMM_DISTRIBUTE_PROBE"), a, b});
  if (share_only) argv.push_back("share-only");
  RunOptions options;
  options.timeout_seconds = 60;  // a deadlock shows as a time-out
  options.set_env = {simulate ? "BLOCKMM_SIMULATE_NODES=1" : "BLOCKMM_SIMULATE_NODES=0"};
  return run_process(argv, options);
}

std::vector<RankReport> reports(const RunResult& run, int ranks) {
  std::vector<RankReport> out(static_cast<std::size_t>(ranks));
  for (const std::string& line : split_lines(run.out)) {
    std::istringstream in(line);
    std::string word, status;
    int rank = -1;
    char colon = 0;
    if (!(in >> word >> rank >> colon >> status) || word != "rank" || rank < 0 || rank >= ranks) continue;
    RankReport& r = out[static_cast<std::size_t>(rank)];
    r.line = line;
    r.ok = status == "ok";
    for (std::string key; in >> key;) {
      long long v = 0;
      if (key == "rows") {
        in >> v;
        r.values["lo"] = v;
        in >> v;
        r.values["hi"] = v;
      } else if (in >> v) {
        r.values[key] = v;
      }
    }
  }
  return out;
}

long long total(const std::vector<RankReport>& rs, const std::string& key) {
  long long sum = 0;
  for (const RankReport& r : rs) sum += r.values.count(key) ? r.values.at(key) : 0;
  return sum;
}

class Distribute : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-distribute"};

  std::string put(const std::string& name, const InputRecords& records) const {
    const std::string path = scratch / name;
    write_bytes(path, encode(records));
    return path;
  }

  // Runs the probe on `ranks` ranks, both ways; every rank's operands must be right.
  // `moves`: the inputs certainly place some records on another rank than the one that read them.
  void expect_distributed(const std::string& a, const std::string& b, const std::vector<int>& rank_counts, bool moves) {
    for (int ranks : rank_counts) {
      for (bool simulate : {false, true}) {
        SCOPED_TRACE("mpiexec -n " + std::to_string(ranks) + (simulate ? " simulated nodes" : ""));
        const RunResult run = probe(ranks, simulate, a, b);
        ASSERT_EQ(run.exit_code, 0) << run.describe();
        const std::vector<RankReport> rs = reports(run, ranks);
        for (const RankReport& r : rs) ASSERT_TRUE(r.ok) << r.line << "\n" << run.describe();
        // Never a record's bytes between ranks of one node.
        EXPECT_EQ(total(rs, "records-within"), 0) << run.out;
        if (simulate) {
          EXPECT_EQ(total(rs, "index-within"), 0) << run.out;  // each rank alone on its node
          if (moves) {
            EXPECT_GT(total(rs, "records-between"), 0) << run.out;
          }
        } else {
          // One machine, one node: every rank takes its records from the files itself, so not
          // even row requests move.
          EXPECT_EQ(total(rs, "records-between"), 0) << run.out;
          EXPECT_EQ(total(rs, "index-between"), 0) << run.out;
          EXPECT_EQ(total(rs, "index-within"), 0) << run.out;
        }
      }
    }
  }
};

TEST_F(Distribute, RandomBinaryInputsGiveEveryRankItsOneRankOperands) {
  std::mt19937_64 rng(1616);
  for (int c = 0; c < 4; ++c) {
    const testing::RandomSpec spec = testing::random_spec(rng, 24);
    SCOPED_TRACE("random case " + std::to_string(c) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m));
    const std::string a = put("a.bin", testing::random_blocks(spec, rng));
    const std::string b = put("b.bin", testing::random_blocks(spec, rng));
    expect_distributed(a, b, {2, 3}, false);
  }
  testing::RandomSpec medium;  // enough blocks that records certainly change rank
  medium.n = 600;
  medium.m = 3;
  medium.density = 0.05;
  const std::string a = put("a.bin", testing::random_blocks(medium, rng));
  const std::string b = put("b.bin", testing::random_blocks(medium, rng));
  expect_distributed(a, b, {2, 3, 4}, true);
}

// An input that only serves this rank's share (partition/relabel's relabelled shares in memory)
// cannot be read by number from another rank: its records travel as bytes, also within a node,
// and every rank still gets its one-rank operands.
TEST_F(Distribute, ShareOnlyInputsTravelAsBytesWithinTheNode) {
  std::mt19937_64 rng(1717);
  testing::RandomSpec spec;
  spec.n = 600;
  spec.m = 3;
  spec.density = 0.05;
  const std::string a = put("a.bin", testing::random_blocks(spec, rng));
  const std::string b = put("b.bin", testing::random_blocks(spec, rng));
  for (int ranks : {2, 3}) {
    for (bool simulate : {false, true}) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(ranks) + (simulate ? " simulated nodes" : ""));
      const RunResult run = probe(ranks, simulate, a, b, true);
      ASSERT_EQ(run.exit_code, 0) << run.describe();
      const std::vector<RankReport> rs = reports(run, ranks);
      for (const RankReport& r : rs) ASSERT_TRUE(r.ok) << r.line << "\n" << run.describe();
      EXPECT_GT(total(rs, simulate ? "records-between" : "records-within"), 0) << run.out;
      EXPECT_EQ(total(rs, simulate ? "records-within" : "records-between"), 0) << run.out;
    }
  }
}

TEST_F(Distribute, BlockOrderOneAndEmptyOperand) {
  std::mt19937_64 rng(7);
  testing::RandomSpec ones;
  ones.n = 300;
  ones.m = 1;
  ones.density = 0.05;
  const std::string a = put("a.bin", testing::random_blocks(ones, rng));
  const std::string b = put("b.bin", testing::random_blocks(ones, rng));
  expect_distributed(a, b, {2, 4}, true);
  // A without blocks: nothing to place, B rows asked for: none.
  const std::string empty = put("empty.bin", testing::make_records(300, 1, {}));
  expect_distributed(empty, b, {3}, false);
}

TEST_F(Distribute, Hdf5InputsGiveEveryRankItsOneRankOperands) {
  std::mt19937_64 rng(8);
  testing::RandomSpec spec;
  spec.n = 420;
  spec.m = 5;
  spec.density = 0.06;
  const std::string a = put("a.bin", testing::random_blocks(spec, rng));
  const std::string b = put("b.bin", testing::random_blocks(spec, rng));
  const std::string bin = blockmm_bin();
  const std::string convert = bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert";
  for (const auto& [from, to] : {std::pair{a, scratch / "a.h5"}, std::pair{b, scratch / "b.h5"}}) {
    const RunResult run = run_process({convert, from, to});
    ASSERT_EQ(run.exit_code, 0) << run.describe();
  }
  expect_distributed(scratch / "a.h5", scratch / "b.h5", {2, 3}, true);
  expect_distributed(a, scratch / "b.h5", {2}, true);  // one of each format
}

// A duplicate in B (records read by different ranks) stops every rank with the message of a
// one-rank run, which names the file, the block and both records.
TEST_F(Distribute, DuplicateInBStopsEveryRankWithTheOneRankMessage) {
  std::mt19937_64 rng(9);
  testing::RandomSpec spec;
  spec.n = 400;
  spec.m = 4;
  spec.density = 0.05;
  spec.shuffle = true;
  const InputRecords a_records = testing::random_blocks(spec, rng);
  InputRecords b_records = testing::random_blocks(spec, rng);
  const std::int64_t last = b_records.size() - 1;
  set_record_index(b_records.record(last), record_row(b_records.record(0)), record_col(b_records.record(0)));
  const std::string a = put("a.bin", a_records), b = put("dup.bin", b_records);
  const RunResult plain = run_blockmm({"-q", "--backend", "cpu", a, b, scratch / "C.bin"});
  ASSERT_EQ(plain.exit_code, 3) << plain.describe();
  const std::string prefix = "blockmm: error: ";
  const std::vector<std::string> lines = split_lines(plain.err);
  ASSERT_EQ(lines.size(), 1u) << plain.describe();
  ASSERT_EQ(lines[0].rfind(prefix, 0), 0u) << plain.describe();
  const std::string message = lines[0].substr(prefix.size());
  EXPECT_NE(message.find("at records 0 and " + std::to_string(last)), std::string::npos) << message;
  for (int ranks : {2, 3}) {
    for (bool simulate : {false, true}) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(ranks) + (simulate ? " simulated nodes" : ""));
      const RunResult run = probe(ranks, simulate, a, b);
      EXPECT_EQ(run.exit_code, 3) << run.describe();
      const std::vector<std::string> out = split_lines(run.out);
      for (int r = 0; r < ranks; ++r) {
        const std::string want = "rank " + std::to_string(r) + ": exit 3: " + message;
        EXPECT_NE(std::find(out.begin(), out.end(), want), out.end()) << "no line '" << want << "'\n" << run.describe();
      }
    }
  }
}

}  // namespace
}  // namespace blockmm::e2e
