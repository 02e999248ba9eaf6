// blockmm-gen: determinism (seed, thread count), and every option honoured, checked by reading
// the files back through io::read_input_file and counting independently in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/block_matrix.hpp"
#include "io/binary_format.hpp"
#include "tools/counter_rng.hpp"
#include "tools/row_counts.hpp"
#include "tools/tool_runner.hpp"

namespace blockmm::testing {
namespace {

using Args = std::vector<std::string>;

class GenTest : public ToolTest {
 protected:
  // Runs blockmm-gen quietly into `name`; returns its path.
  std::string gen(const std::string& name, Args args) {
    args.insert(args.begin(), path(name));
    args.push_back("-q");
    const ToolRun run = run_tool("blockmm-gen", args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, "");
    return path(name);
  }
};

struct Facts {
  std::vector<std::pair<std::int32_t, std::int32_t>> keys;  // file order
  std::map<std::int32_t, std::int64_t> per_row;
  std::int64_t zero_blocks = 0;
  std::map<std::uint32_t, std::int64_t> histogram;
};

Facts facts_of(const InputRecords& r) {
  Facts f;
  for (std::int64_t q = 0; q < r.size(); ++q) {
    f.keys.emplace_back(record_row(r.record(q)), record_col(r.record(q)));
    ++f.per_row[record_row(r.record(q))];
    bool zero = true;
    for (std::int64_t e = 0; e < r.shape.block_values(); ++e) {
      ++f.histogram[r.values(q)[e]];
      zero = zero && r.values(q)[e] == 0;
    }
    f.zero_blocks += zero;
  }
  return f;
}

std::int64_t distinct(std::vector<std::pair<std::int32_t, std::int32_t>> keys) {
  std::sort(keys.begin(), keys.end());
  return std::unique(keys.begin(), keys.end()) - keys.begin();
}

TEST_F(GenTest, SameSeedGivesSameBytesWithAnyThreadCount) {
  const std::vector<Args> specs = {
      {"--n", "512", "--m", "4", "--density", "0.2"},
      {"--n", "300", "--m", "3", "--k", "5000", "--order", "sorted", "--skew", "1.2"},
      {"--n", "96", "--m", "1", "--k", "4000", "--order", "reverse", "--zero-blocks", "0.3", "--max-value", "3"},
      {"--n", "640", "--m", "8", "--k", "6000", "--skew", "2", "--zero-blocks", "0.1", "--min-value", "100"},
  };
  for (std::size_t s = 0; s < specs.size(); ++s) {
    SCOPED_TRACE("spec " + std::to_string(s));
    Args one = specs[s], two = specs[s], three = specs[s];
    one.insert(one.end(), {"--seed", "7", "--threads", "1"});
    two.insert(two.end(), {"--seed", "7", "--threads", "2"});
    three.insert(three.end(), {"--seed", "7", "--threads", "3"});
    const std::string a = read_bytes(gen("one.bin", one));
    EXPECT_GT(a.size(), 12u);
    EXPECT_TRUE(a == read_bytes(gen("two.bin", two)));
    EXPECT_TRUE(a == read_bytes(gen("three.bin", three)));
    Args other = specs[s];
    other.insert(other.end(), {"--seed", "8", "--threads", "2"});
    EXPECT_FALSE(a == read_bytes(gen("other.bin", other)));
  }
}

TEST_F(GenTest, ExactlyKDistinctBlocksInRange) {
  for (const std::string k : {"0", "1", "777", "1024"}) {  // 1024 = every block of a 32 x 32 grid
    SCOPED_TRACE("k = " + k);
    const InputRecords r = io::read_input_file(gen("a.bin", {"--n", "128", "--m", "4", "--k", k, "--seed", "3"}));
    EXPECT_EQ(r.shape, (MatrixShape{128, 4}));
    EXPECT_EQ(r.size(), std::stoll(k));
    const Facts f = facts_of(r);
    EXPECT_EQ(distinct(f.keys), r.size());
    EXPECT_EQ(f.zero_blocks, 0);  // without --zero-blocks no block is all zero
  }
}

TEST_F(GenTest, DensityIsRoundedToK) {
  // p = 20: 0.333 * 400 = 133.2 -> 133; 0.004 * 400 = 1.6 -> 2.
  EXPECT_EQ(io::read_input_file(gen("a.bin", {"--n", "100", "--m", "5", "--density", "0.333"})).size(), 133);
  EXPECT_EQ(io::read_input_file(gen("b.bin", {"--n", "100", "--m", "5", "--density", "0.004"})).size(), 2);
  EXPECT_EQ(io::read_input_file(gen("c.bin", {"--n", "100", "--m", "5", "--density", "1"})).size(), 400);
  EXPECT_EQ(io::read_input_file(gen("d.bin", {"--n", "100", "--m", "5", "--density", "0"})).size(), 0);
}

// The skew's definition computed another way: cap every row whose share exceeds p, hand the
// rest out again over the uncapped rows, until no share exceeds p.
std::vector<double> skew_shares(std::int64_t k, std::int64_t p, double alpha) {
  std::vector<bool> capped(static_cast<std::size_t>(p), false);
  std::vector<double> share(static_cast<std::size_t>(p), 0);
  for (;;) {
    double weight = 0;
    std::int64_t left = k;
    for (std::int64_t i = 0; i < p; ++i) {
      if (capped[i]) left -= p;
      else weight += std::pow(i + 1.0, -alpha);
    }
    bool changed = false;
    for (std::int64_t i = 0; i < p; ++i) {
      share[i] = capped[i] ? static_cast<double>(p) : static_cast<double>(left) * std::pow(i + 1.0, -alpha) / weight;
      if (!capped[i] && share[i] > static_cast<double>(p)) changed = capped[i] = true;
    }
    if (!changed) return share;
  }
}

TEST_F(GenTest, SkewFollowsThePowerLawWithRowsCappedAtP) {
  struct Case {
    std::int32_t n, m;
    std::int64_t k;
    double alpha;
  };
  // The 1.5 and 3 cases cap the heaviest rows; 0 spreads evenly.
  for (const Case c : {Case{256, 4, 1000, 1.5}, Case{256, 4, 3000, 3}, Case{200, 2, 777, 0}, Case{64, 1, 4000, 0.7}}) {
    SCOPED_TRACE("k = " + std::to_string(c.k) + ", alpha = " + std::to_string(c.alpha));
    const std::int64_t p = c.n / c.m;
    const InputRecords r = io::read_input_file(gen("a.bin", {"--n", std::to_string(c.n), "--m", std::to_string(c.m), "--k",
                                                             std::to_string(c.k), "--skew", std::to_string(c.alpha)}));
    const Facts f = facts_of(r);
    const std::vector<double> share = skew_shares(c.k, p, c.alpha);
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < p; ++i) {
      const std::int64_t got = f.per_row.count(static_cast<std::int32_t>(i)) ? f.per_row.at(static_cast<std::int32_t>(i)) : 0;
      EXPECT_LT(std::abs(static_cast<double>(got) - share[i]), 1.0 + 1e-9) << "row " << i;
      EXPECT_LE(got, p);
      total += got;
    }
    EXPECT_EQ(total, c.k);
    if (c.alpha >= 1.5) {
      EXPECT_EQ(f.per_row.at(0), p) << "the heaviest row should be full";
    }
  }
}

TEST(RowCounts, MatchTheDefinitionOnManyCases) {
  std::uint64_t state = 42;
  for (int t = 0; t < 300; ++t) {
    state = tools::mix64(state + t);
    const std::int64_t p = 1 + static_cast<std::int64_t>(state % 90);
    const std::int64_t k = static_cast<std::int64_t>(tools::mix64(state) % static_cast<std::uint64_t>(p * p + 1));
    const double alpha = static_cast<double>(tools::mix64(state ^ 1) % 500) / 100.0;
    SCOPED_TRACE("p = " + std::to_string(p) + ", k = " + std::to_string(k) + ", alpha = " + std::to_string(alpha));
    const std::vector<std::int64_t> counts = tools::block_row_counts(k, p, alpha);
    const std::vector<double> share = skew_shares(k, p, alpha);
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < p; ++i) {
      ASSERT_GE(counts[i], 0);
      ASSERT_LE(counts[i], p);
      ASSERT_LT(std::abs(static_cast<double>(counts[i]) - share[i]), 1.0 + 1e-6) << "row " << i;
      total += counts[i];
    }
    EXPECT_EQ(total, k);
  }
  // Steep enough that plain weights underflow: still exact totals.
  const std::vector<std::int64_t> steep = tools::block_row_counts(2500, 100, 2000);
  EXPECT_EQ(steep[0], 100);
  EXPECT_EQ(steep[24], 100);
  EXPECT_EQ(steep[25], 0);
}

TEST(KeyedPermutation, IsABijectionOnEverySize) {
  for (std::uint64_t size : {1, 2, 3, 4, 5, 17, 64, 100, 1000, 4097}) {
    const tools::KeyedPermutation perm(size * 31 + 5, size);
    std::vector<bool> seen(size, false);
    for (std::uint64_t x = 0; x < size; ++x) {
      const std::uint64_t y = perm(x);
      ASSERT_LT(y, size);
      ASSERT_FALSE(seen[y]) << "size " << size << ": " << y << " reached twice";
      seen[y] = true;
    }
  }
}

TEST_F(GenTest, ZeroBlocksAreExactlyTheRequestedFraction) {
  struct Case {
    Args args;
    double fraction;
  };
  // Values 0..1 with m = 1: half the blocks would come out zero by chance; only the asked-for
  // fraction may.
  const std::vector<Case> cases = {
      {{"--n", "400", "--m", "4", "--k", "400", "--zero-blocks", "0.25"}, 0.25},
      {{"--n", "200", "--m", "1", "--k", "3001", "--zero-blocks", "0.1", "--max-value", "1"}, 0.1},
      {{"--n", "200", "--m", "1", "--k", "3001", "--max-value", "1"}, 0},
      {{"--n", "64", "--m", "8", "--k", "64", "--zero-blocks", "1", "--max-value", "0"}, 1},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const InputRecords r = io::read_input_file(gen("a.bin", cases[c].args));
    const Facts f = facts_of(r);
    EXPECT_EQ(f.zero_blocks, std::llround(cases[c].fraction * static_cast<double>(r.size()))) << "case " << c;
    if (cases[c].fraction > 0 && cases[c].fraction < 1) {
      EXPECT_GT(f.histogram.size(), 1u);
    }
  }
}

TEST_F(GenTest, ValuesAreUniformInTheRange) {
  const InputRecords r =
      io::read_input_file(gen("a.bin", {"--n", "256", "--m", "8", "--k", "1000", "--min-value", "5", "--max-value", "7"}));
  const Facts f = facts_of(r);
  ASSERT_EQ(f.histogram.size(), 3u);
  const double each = 64000.0 / 3;
  for (const auto& [value, count] : f.histogram) {
    EXPECT_GE(value, 5u);
    EXPECT_LE(value, 7u);
    EXPECT_NEAR(static_cast<double>(count), each, each * 0.03) << "value " << value;  // ~8 sigma
  }
  // The full range reaches both ends.
  const Facts wide =
      facts_of(io::read_input_file(gen("b.bin", {"--n", "256", "--m", "8", "--k", "1000", "--max-value", "65535"})));
  EXPECT_LT(wide.histogram.begin()->first, 10u);
  EXPECT_GT(wide.histogram.rbegin()->first, 65525u);
}

// The default range is the course generator's, 0..1023: a product of such matrices saturates
// nothing while a sum has at most 4104 terms (1023^2 * 4104 < 2^32 - 1).
TEST_F(GenTest, DefaultValuesAreAtMost1023) {
  const Facts f = facts_of(io::read_input_file(gen("a.bin", {"--n", "256", "--m", "8", "--k", "1000"})));
  EXPECT_LT(f.histogram.begin()->first, 5u);
  EXPECT_EQ(f.histogram.rbegin()->first, 1023u);
  const ToolRun run = run_tool("blockmm-gen", {path("c.bin"), "--n", "64", "--m", "4", "--k", "10"});
  EXPECT_NE(run.out.find("values [0, 1023]"), std::string::npos) << run.out;
  // A product with sums of 64 * 64 = 4096 terms stays below saturation.
  gen("d.bin", {"--n", "64", "--m", "64", "--k", "1", "--min-value", "1023", "--seed", "3"});
  ASSERT_EQ(run_tool("blockmm", {"-q", path("d.bin"), path("d.bin"), path("dd.bin")}).exit_code, 0);
  const ToolRun info = run_tool("blockmm-info", {"--json", path("dd.bin")});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("\"max_value\": " + std::to_string(64u * 1023u * 1023u)), std::string::npos) << info.out;
}

// -n/-m/-k, --n/--m/--k and --block-size (blockmm-import's and blockmm-spy's name for m) agree.
TEST_F(GenTest, ShortAndLongOptionNamesAgree) {
  const std::string a = read_bytes(gen("a.bin", {"--n", "64", "--m", "4", "--k", "30", "--seed", "7"}));
  EXPECT_EQ(read_bytes(gen("b.bin", {"-n", "64", "-m", "4", "-k", "30", "--seed", "7"})), a);
  EXPECT_EQ(read_bytes(gen("c.bin", {"-n", "64", "--block-size", "4", "-k", "30", "--seed", "7"})), a);
  EXPECT_EQ(read_bytes(gen("d.bin", {"--n=64", "--m=4", "--k=30", "--seed=7"})), a);
}

TEST_F(GenTest, OrdersHoldTheSameMatrix) {
  const Args base = {"--n", "200", "--m", "2", "--k", "3000", "--skew", "0.8", "--seed", "5"};
  auto with = [&](const std::string& order) {
    Args a = base;
    a.insert(a.end(), {"--order", order});
    return a;
  };
  const InputRecords sorted = io::read_input_file(gen("s.bin", with("sorted")));
  const InputRecords reverse = io::read_input_file(gen("r.bin", with("reverse")));
  const InputRecords shuffled = io::read_input_file(gen("h.bin", with("shuffled")));
  const InputRecords fallback = io::read_input_file(gen("d.bin", base));  // default order
  const Facts fs = facts_of(sorted), fr = facts_of(reverse), fh = facts_of(shuffled);
  EXPECT_TRUE(std::is_sorted(fs.keys.begin(), fs.keys.end()));
  EXPECT_EQ(distinct(fs.keys), sorted.size());
  EXPECT_TRUE(std::is_sorted(fr.keys.rbegin(), fr.keys.rend()));
  EXPECT_FALSE(std::is_sorted(fh.keys.begin(), fh.keys.end()));
  EXPECT_FALSE(std::is_sorted(fh.keys.rbegin(), fh.keys.rend()));
  EXPECT_TRUE(shuffled.bytes == fallback.bytes);

  // Same records: sort each file's records by (i, j) and compare bytes.
  auto canonical = [](const InputRecords& r) {
    std::map<std::pair<std::int32_t, std::int32_t>, std::string> by_key;
    for (std::int64_t q = 0; q < r.size(); ++q)
      by_key[{record_row(r.record(q)), record_col(r.record(q))}] =
          std::string(reinterpret_cast<const char*>(r.record(q)), static_cast<std::size_t>(r.stride()));
    std::string all;
    for (const auto& [key, bytes] : by_key) all += bytes;
    return all;
  };
  EXPECT_EQ(canonical(sorted), std::string(reinterpret_cast<const char*>(sorted.bytes.data()), sorted.bytes.size()));
  EXPECT_TRUE(canonical(sorted) == canonical(reverse));
  EXPECT_TRUE(canonical(sorted) == canonical(shuffled));

  // And blockmm-cmp agrees.
  EXPECT_EQ(run_tool("blockmm-cmp", {path("s.bin"), path("h.bin")}).exit_code, 0);
}

TEST_F(GenTest, BadArgumentsExitTwoAndWriteNothing) {
  const std::vector<Args> bad = {
      {"--n", "250", "--m", "4", "--k", "3"},                        // m does not divide n
      {"--n", "0", "--m", "4", "--k", "0"},                          // n not positive
      {"--n", "16", "--m", "4", "--k", "17"},                        // k > p^2
      {"--n", "16", "--m", "4", "--k", "-1"},                        // negative k
      {"--n", "16", "--m", "4", "--density", "1.5"},                 // density out of [0, 1]
      {"--n", "16", "--m", "4"},                                     // neither k nor density
      {"--n", "16", "--m", "4", "--k", "3", "--density", "0.1"},     // both
      {"--n", "16", "--m", "4", "--k", "3", "--min-value", "9", "--max-value", "8"},
      {"--n", "16", "--m", "4", "--k", "3", "--max-value", "65536"},
      {"--n", "16", "--m", "4", "--k", "3", "--min-value", "-1"},
      {"--n", "16", "--m", "4", "--k", "3", "--skew", "-0.5"},
      {"--n", "16", "--m", "4", "--k", "3", "--zero-blocks", "1.5"},
      {"--n", "16", "--m", "4", "--k", "3", "--max-value", "0"},     // all zero, not asked for
      {"--n", "16", "--m", "4", "--k", "3", "--order", "random"},
      {"--n", "16", "--m", "4", "--k", "3", "--bogus"},
      {"--n", "16", "--m", "4", "--k", "3", "--threads", "two"},
      {"--n", "16", "--m", "4", "--k", "3", "--threads", "-1"},
      {"--n", "65536", "--m", "1", "--k", "2147483648"},             // k beyond the int32 header
  };
  for (const Args& args : bad) {
    Args full = args;
    full.insert(full.begin(), path("out.bin"));
    const ToolRun run = run_tool("blockmm-gen", full);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    EXPECT_EQ(run.exit_code, 2) << shown << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("blockmm-gen: error: ", 0), 0u) << shown;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << shown << "\n" << run.err;  // one line
    EXPECT_LT(run.err.size(), 200u) << shown << "\n" << run.err;
    EXPECT_FALSE(file_exists(path("out.bin"))) << shown;
  }
}

TEST_F(GenTest, UnwritableOutputExitsFourAndLeavesNoTemporary) {
  const ToolRun run = run_tool("blockmm-gen", {path("missing/out.bin"), "--n", "16", "--m", "4", "--k", "3"});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("missing/out.bin"), std::string::npos) << run.err;
  // A directory as the target: refused before anything is created beside it.
  const ToolRun dir = run_tool("blockmm-gen", {path(""), "--n", "16", "--m", "4", "--k", "3"});
  EXPECT_NE(dir.exit_code, 0);
  EXPECT_TRUE(std::filesystem::is_empty(path("")));
}

TEST_F(GenTest, SummaryLineUnlessQuiet) {
  const ToolRun run = run_tool("blockmm-gen", {path("a.bin"), "--n", "64", "--m", "4", "--k", "10"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("k = 10"), std::string::npos) << run.out;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1);
}

}  // namespace
}  // namespace blockmm::testing
