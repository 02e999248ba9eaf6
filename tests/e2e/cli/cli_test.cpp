// The blockmm executable end to end, started as a child process without MPI: output failures
// (exit 4) and the atomic replacement of the output, products checked against independent
// oracles on fixed and random inputs, and the --stats text and JSON. The input rules are
// input_rules_test.cpp's, usage and --help usage_test.cpp's.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "e2e/cli/cli_fixture.hpp"
#include "support/dense_reference.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// Output failures (exit 4) and atomic replacement.

TEST_F(Cli, OutputIntoMissingDirectory) {
  const std::string target = out_dir + "/no/such/dir/C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {}, out_dir));
}

TEST_F(Cli, OutputIntoDirectoryNobodyMayWrite) {
  // /proc takes no new files, not even from root.
  const std::string proc_target = "/proc/blockmm-cli-test-C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, proc_target}), 4, proc_target, {}, out_dir));
  EXPECT_FALSE(path_exists(proc_target));
}

TEST_F(Cli, OutputIntoUnwritableDirectory) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: chmod 555 does not stop root (OutputIntoDirectoryNobodyMayWrite covers exit 4)";
  const std::string locked = scratch.subdir("locked");
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
  const std::string target = locked + "/C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {}, locked));
}

TEST_F(Cli, OutputPathIsADirectory) {
  const std::string target = scratch.subdir("out/C.bin");
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {"directory"}, out_dir, {"C.bin"}));
  EXPECT_TRUE(list_dir(target).empty());
}

TEST_F(Cli, SuccessReplacesTheTargetNotWhatALinkPointsTo) {
  const std::string victim = scratch / "victim.txt";
  write_text(victim, "must stay\n");
  ASSERT_EQ(::symlink(victim.c_str(), out.c_str()), 0);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, out})));
  struct stat st {};
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the output link was written through instead of replaced";
  const std::vector<std::byte> kept = read_bytes(victim);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(kept.data()), kept.size()), "must stay\n");
  EXPECT_TRUE(read_bytes(out) == encode(sparse_oracle(small_a(), small_b())));
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
}

// ---------------------------------------------------------------------------------------------
// Products: fixed cases with hand-computed results, random cases against the oracles.

TEST_F(Cli, FixedCaseWithZeroBlockAndSaturation) {
  // n = 4, m = 2. C(0,1) = A(0,1) x B(1,1) with A(0,1) all zero: must be omitted.
  // C(1,1) = 2 * 65535^2 per value > 2^32 - 1: saturates.
  const InputRecords fa = make_records(4, 2, {{1, 1, fill(2, 65535)}, {0, 1, fill(2, 0)}, {0, 0, {1, 2, 3, 4}}});
  const InputRecords fb = make_records(4, 2, {{1, 0, {1, 0, 0, 1}}, {1, 1, fill(2, 65535)}, {0, 0, {5, 6, 7, 8}}});
  const std::string pa = put("fa.bin", encode(fa)), pb = put("fb.bin", encode(fb));
  std::vector<std::byte> expected;
  auto put_i32 = [&](std::int32_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    expected.insert(expected.end(), p, p + 4);
  };
  for (std::int32_t v : {4, 2, 3}) put_i32(v);
  for (std::int32_t v : {0, 0, 19, 22, 43, 50}) put_i32(v);
  for (std::int32_t v : {1, 0, 65535, 65535, 65535, 65535}) put_i32(v);
  put_i32(1);
  put_i32(1);
  for (int e = 0; e < 4; ++e) put_i32(-1);  // 0xFFFFFFFF
  for (const char* backend : {"cpu", "reference", "auto"}) {
    SCOPED_TRACE(backend);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, out})));
    EXPECT_TRUE(read_bytes(out) == expected);
    EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
  }
}

TEST_F(Cli, RandomProductsMatchTheDenseOracle) {
  std::mt19937_64 rng(20251121);
  int saturated = 0;
  for (int c = 0; c < 10; ++c) {
    testing::RandomSpec spec = testing::random_spec(rng, 16);
    if (c % 3 == 0) {  // dense and large values: saturation must fire
      spec.max_value = 65535;
      spec.density = 1.0;
      spec.zero_value_fraction = 0;
      spec.empty_row_fraction = spec.empty_col_fraction = 0;
    }
    const InputRecords ra = testing::random_blocks(spec, rng);
    const InputRecords rb = testing::random_blocks(spec, rng);
    const std::string pa = put("ra.bin", encode(ra)), pb = put("rb.bin", encode(rb));
    const OutputRecords dense = testing::dense_product(ra, rb);
    ASSERT_EQ(check_canonical(dense), "");
    const OutputRecords sparse = sparse_oracle(ra, rb);
    ASSERT_TRUE(encode(dense) == encode(sparse)) << testing::compare_outputs(dense, sparse);
    for (std::int64_t q = 0; q < dense.size(); ++q)
      for (std::int64_t e = 0; e < dense.shape.block_values(); ++e) saturated += dense.values(q)[e] == 0xFFFFFFFFu;
    const char* backend = c % 2 == 0 ? "cpu" : "reference";
    SCOPED_TRACE("case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m) +
                 " backend " + backend);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, "--threads", std::to_string(1 + c % 3), pa, pb, out})));
    OutputRecords got;
    ASSERT_EQ(load(out, got), "");
    EXPECT_EQ(check_canonical(got), "");
    EXPECT_EQ(testing::compare_outputs(dense, got), "");
    EXPECT_TRUE(read_bytes(out) == encode(dense));
  }
  EXPECT_GT(saturated, 0) << "no random case exercised saturation";
}

TEST_F(Cli, SameFileAsBothOperandsWithRelativePaths) {
  std::mt19937_64 rng(42);
  testing::RandomSpec spec;
  spec.n = 36;
  spec.m = 3;
  spec.density = 0.4;
  const InputRecords sq = testing::random_blocks(spec, rng);
  put("square.bin", encode(sq));
  RunOptions in_dir_cwd;
  in_dir_cwd.cwd = in_dir;
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "square.bin", "square.bin", "AA.bin"}, in_dir_cwd)));
  EXPECT_TRUE(read_bytes(in_dir + "/AA.bin") == encode(testing::dense_product(sq, sq)));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", in_dir + "/square.bin", in_dir + "/square.bin", out})));
  EXPECT_TRUE(read_bytes(out) == encode(testing::dense_product(sq, sq)));
  // No temporary files were left beside either output.
  for (const auto& name : list_dir(in_dir)) EXPECT_EQ(name.find(".blockmm-tmp."), std::string::npos) << name;
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
}

TEST_F(Cli, EmptyInputsGiveAHeaderOnlyOutput) {
  const std::string empty = put("empty.bin", header_only(16, 4, 0));
  const std::string zeros = put("zeros.bin", encode(make_records(16, 4, {{0, 0, fill(4, 0)}, {3, 2, fill(4, 0)}})));
  const std::vector<std::byte> header_only_output = header_only(16, 4, 0);
  const std::vector<std::vector<std::string>> pairs = {{empty, empty}, {empty, b}, {a, empty}, {zeros, b}, {a, zeros}};
  for (const char* backend : {"cpu", "reference"})
    for (const auto& pair : pairs) {
      SCOPED_TRACE(std::string(backend) + " " + pair[0] + " x " + pair[1]);
      ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pair[0], pair[1], out})));
      EXPECT_TRUE(read_bytes(out) == header_only_output) << "size " << file_size(out);
      EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
    }
}

// ---------------------------------------------------------------------------------------------
// --stats.

TEST_F(Cli, StatsJsonIsValidAndCorrect) {
  std::mt19937_64 rng(5);
  testing::RandomSpec spec;
  spec.n = 60;
  spec.m = 5;
  spec.density = 0.3;
  spec.zero_block_fraction = 0.2;  // zero blocks are records but not work
  const InputRecords ra = testing::random_blocks(spec, rng), rb = testing::random_blocks(spec, rng);
  const std::string pa = put("sa.bin", encode(ra)), pb = put("sb.bin", encode(rb));
  const std::string stats_file = scratch / "stats.json";
  const RunResult run = run_blockmm({"-q", "--stats=json", "--stats-file", stats_file, "--backend", "cpu", pa, pb, out});
  ASSERT_TRUE(succeeded(run));
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(run.out)) << run.out;
  const OutputRecords expected = sparse_oracle(ra, rb);
  const std::vector<std::int64_t> work = row_products(ra, rb);
  const std::int64_t products = std::accumulate(work.begin(), work.end(), std::int64_t{0});
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_EQ(j.at("ranks"), 1);
  EXPECT_EQ(j.at("distribution"), "one rank");
  EXPECT_EQ(j.at("n"), 60);
  EXPECT_EQ(j.at("m"), 5);
  EXPECT_EQ(j.at("output_format"), "binary");
  EXPECT_EQ(j.at("blocks").at("a_records"), ra.size());
  EXPECT_EQ(j.at("blocks").at("b_records"), rb.size());
  EXPECT_EQ(j.at("blocks").at("c"), expected.size());
  EXPECT_EQ(j.at("block_products"), products);
  EXPECT_EQ(j.at("useful_macs"), products * 125);
  EXPECT_EQ(j.at("output_bytes"), file_size(out));
  EXPECT_DOUBLE_EQ(j.at("imbalance").get<double>(), 1.0);
  for (const char* phase : {"read", "exchange", "build", "symbolic", "numeric", "write", "commit", "total"}) {
    ASSERT_TRUE(j.at("seconds").at(phase).is_number()) << phase;
    EXPECT_GE(j.at("seconds").at(phase).get<double>(), 0.0) << phase;
  }
  ASSERT_EQ(j.at("per_rank").size(), 1u);
  EXPECT_EQ(j.at("per_rank")[0].at("rank"), 0);
  EXPECT_EQ(j.at("per_rank")[0].at("block_rows"), 12);
  EXPECT_EQ(j.at("per_rank")[0].at("work"), products);
  EXPECT_TRUE(read_bytes(out) == encode(expected));
  // The stats file holds the same document.
  nlohmann::json from_file;
  const std::vector<std::byte> file_bytes = read_bytes(stats_file);
  ASSERT_NO_THROW(from_file = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(file_bytes.data()),
                                                                file_bytes.size())));
  EXPECT_EQ(from_file.at("block_products"), products);
  EXPECT_EQ(from_file.at("blocks"), j.at("blocks"));

  // Plain --stats prints text; without --stats stdout stays empty.
  const RunResult text = run_blockmm({"-q", "--stats", pa, pb, out});
  ASSERT_TRUE(succeeded(text));
  EXPECT_NE(text.out.find("blockmm stats"), std::string::npos) << text.out;
  const RunResult silent = run_blockmm({"-q", pa, pb, out});
  ASSERT_TRUE(succeeded(silent));
  EXPECT_EQ(silent.out, "");
}

TEST_F(Cli, UnwritableStatsFileExitsFour) {
  const std::string target = scratch / "no/such/dir/stats.json";
  const RunResult run = run_blockmm({"-q", "--stats-file", target, a, b, out});
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  const std::vector<std::string> lines = split_lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.describe();
  EXPECT_EQ(lines[0].rfind(std::string(kErrorPrefix) + target, 0), 0u) << run.describe();
}

}  // namespace
}  // namespace blockmm::e2e
