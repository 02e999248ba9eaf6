// blockmm under a real mpiexec (1 to 5 ranks, oversubscribed), through mpirun_blockmm.sh: the
// output file is byte-identical for every rank count, to the run without mpiexec, to the
// reference backend and to an independent oracle; ranks without rows work; errors found by one
// rank end every rank with the same code and one message, leaving no file; --stats reports
// per-rank work and a balance by work, not by rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <stdlib.h>
#include <thread>

#include "support/harness.hpp"
#include "support/dense_reference.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

#ifndef BLOCKMM_DEFAULT_COL380_DIR
#define BLOCKMM_DEFAULT_COL380_DIR ""
#endif

namespace blockmm::e2e {
namespace {

// The rank counts a test sweeps. Under AddressSanitizer (CI's second pass over the suite,
// which looks for memory errors, not rank-count coverage) every rank's start costs about a
// second, so that build keeps the smallest several-rank count and the largest of the list; the
// release build runs them all.
std::vector<int> rank_counts(std::vector<int> all) {
#ifdef BLOCKMM_TEST_ASAN
  std::vector<int> kept;
  for (int n : all)
    if (n > 1) {
      kept.push_back(n);
      break;
    }
  if (!all.empty() && (kept.empty() || all.back() != kept.front())) kept.push_back(all.back());
  return kept;
#else
  return all;
#endif
}

// Every value 65535: two products of a sum already exceed 2^32 - 1.
void saturate(InputRecords& x) {
  const std::uint16_t top = 65535;
  for (std::int64_t q = 0; q < x.size(); ++q)
    for (std::int64_t v = 0; v < std::int64_t{x.shape.m} * x.shape.m; ++v) std::memcpy(x.record(q) + 8 + 2 * v, &top, 2);
}

struct MpiRun {
  RunResult run;
  std::vector<int> rank_codes;  // each rank's own exit code (-1: none recorded)
  std::string describe() const {
    std::string codes;
    for (int c : rank_codes) codes += " " + std::to_string(c);
    return "rank exit codes:" + codes + "\n" + run.describe();
  }
};

// mpiexec -n `ranks` blockmm `args` through the script (a 60 s guard inside it).
// `env`: "NAME=value" settings for mpiexec and so every rank (e.g. BLOCKMM_SIMULATE_NODES=1).
MpiRun run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  const std::string script = env_or("BLOCKMM_MPI_SCRIPT");
  if (script.empty()) throw std::runtime_error("BLOCKMM_MPI_SCRIPT is not set (run the tests through ctest)");
  ScratchDir status("blockmm-mpi-status");
  std::vector<std::string> argv{"bash", script, std::to_string(ranks), status.path()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options;
  options.timeout_seconds = 100;  // backstop; the script's own guard is 60 s
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

int count_error_lines(const std::string& err) {
  int count = 0;
  for (const std::string& line : split_lines(err)) count += line.find("blockmm: error:") != std::string::npos;
  return count;
}

::testing::AssertionResult mpi_succeeded(const MpiRun& m) {
  const bool ok = m.run.exit_code == 0 && !m.run.timed_out && count_error_lines(m.run.err) == 0 &&
                  std::all_of(m.rank_codes.begin(), m.rank_codes.end(), [](int c) { return c == 0; });
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected every rank to succeed\n" << m.describe();
}

::testing::AssertionResult plain_succeeded(const RunResult& run) {
  if (run.exit_code == 0 && run.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

// Every rank exited with `code` within `max_seconds`, one "blockmm: error:" line naming `file`
// and each fragment, and `out_dir` is empty: no output, no temporary file.
::testing::AssertionResult every_rank_failed(const MpiRun& m, int code, const std::string& file,
                                             const std::vector<std::string>& fragments, const std::string& out_dir,
                                             double max_seconds = 30) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << m.describe(); };
  if (m.run.timed_out || m.run.exit_code == 124 || m.run.exit_code == 137) return failure("the job hung");
  for (std::size_t r = 0; r < m.rank_codes.size(); ++r)
    if (m.rank_codes[r] != code)
      return failure("rank " + std::to_string(r) + " exited with " + std::to_string(m.rank_codes[r]) + ", expected " +
                     std::to_string(code));
  if (m.run.exit_code != code) return failure("script exit code is not " + std::to_string(code));
  if (m.run.seconds > max_seconds) return failure("took " + std::to_string(m.run.seconds) + " s");
  if (count_error_lines(m.run.err) != 1) return failure("expected exactly one 'blockmm: error:' line");
  std::string line;
  for (const std::string& l : split_lines(m.run.err))
    if (l.find("blockmm: error:") != std::string::npos) line = l;
  if (line.rfind("blockmm: error: " + file + ": ", 0) != 0) return failure("the message does not start with the file");
  for (const std::string& f : fragments)
    if (line.find(f) == std::string::npos) return failure("the message lacks '" + f + "'");
  if (!m.run.out.empty()) return failure("unexpected stdout");
  const auto entries = list_dir(out_dir);
  if (!entries.empty()) return failure("the output directory is not empty: " + entries.front());
  return ::testing::AssertionSuccess();
}

class Mpi : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-mpi"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");

  std::string put(const std::string& name, const InputRecords& records) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, encode(records));
    return path;
  }

  // The plain (no mpiexec) cpu output of A x B; checked against the reference backend and,
  // when given, the expected bytes.
  std::vector<std::byte> plain_product(const std::string& a, const std::string& b,
                                       const std::vector<std::byte>* expected = nullptr) {
    const std::string out = scratch / "plain.bin";
    EXPECT_TRUE(plain_succeeded(run_blockmm({"-q", "--backend", "cpu", a, b, out})));
    const std::vector<std::byte> cpu = read_bytes(out);
    EXPECT_TRUE(plain_succeeded(run_blockmm({"-q", "--backend", "reference", a, b, out})));
    EXPECT_TRUE(read_bytes(out) == cpu) << "cpu and reference backends differ";
    if (expected != nullptr) {
      EXPECT_TRUE(cpu == *expected) << "the plain run differs from the oracle";
    }
    return cpu;
  }

  // A random case on disk: its inputs (saturated where the name starts with "saturating"),
  // their files, and the plain run's product, checked against the oracle.
  struct CaseFiles {
    InputRecords a, b;
    std::string pa, pb;
    std::vector<std::byte> plain;
  };
  CaseFiles case_files(const std::string& name, const testing::RandomSpec& spec, std::mt19937_64& rng) {
    CaseFiles c;
    c.a = testing::random_blocks(spec, rng);
    c.b = testing::random_blocks(spec, rng);
    if (name.rfind("saturating", 0) == 0) {
      saturate(c.a);
      saturate(c.b);
    }
    c.pa = put("a.bin", c.a);
    c.pb = put("b.bin", c.b);
    const std::vector<std::byte> expected = encode(sparse_oracle(c.a, c.b));
    c.plain = plain_product(c.pa, c.pb, &expected);
    return c;
  }

  // mpiexec -n N for each N in `ranks`: every output byte-identical to `plain`.
  void expect_identical(const std::string& a, const std::string& b, const std::vector<std::byte>& plain,
                        const std::vector<int>& ranks, const std::vector<std::string>& extra = {},
                        const std::vector<std::string>& env = {}, const std::string& out_name = "C.bin") {
    const std::string out = out_dir + "/" + out_name;
    for (int n : ranks) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n) + (env.empty() ? "" : " " + env.front()));
      std::vector<std::string> args{"-q", "--threads", "1"};
      args.insert(args.end(), extra.begin(), extra.end());
      args.insert(args.end(), {a, b, out});
      const MpiRun m = run_mpi(n, args, env);
      ASSERT_TRUE(mpi_succeeded(m));
      const std::vector<std::byte> got = read_bytes(out);
      EXPECT_EQ(got.size(), plain.size());
      EXPECT_TRUE(got == plain) << "output under " << n << " ranks differs from the plain run";
      EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{out_name});
      std::remove(out.c_str());
    }
  }

  // blockmm-convert (beside blockmm) from `from` to `to`, by their extensions.
  void convert(const std::string& from, const std::string& to) {
    const std::string bin = blockmm_bin();
    const RunResult run = run_process({bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert", from, to});
    ASSERT_EQ(run.exit_code, 0) << run.describe();
  }
};

// ---------------------------------------------------------------------------------------------
// Identical outputs.

TEST_F(Mpi, RandomInputsGiveIdenticalFilesForOneToFourRanks) {
  std::mt19937_64 rng(4242);
  std::vector<testing::RandomSpec> specs;
  for (int c = 0; c < 3; ++c) specs.push_back(testing::random_spec(rng, 24));
  testing::RandomSpec medium;  // enough rows and blocks that every rank gets real work
  medium.n = 1020;
  medium.m = 4;
  medium.density = 0.03;
  medium.max_value = 65535;
  specs.push_back(medium);
  for (std::size_t c = 0; c < specs.size(); ++c) {
    const testing::RandomSpec& spec = specs[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m) +
                 " density=" + std::to_string(spec.density));
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    if (spec.n <= 200) {
      ASSERT_TRUE(encode(testing::dense_product(a, b)) == expected) << "the oracles disagree";
    }
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  }
}

// Each rank copies its panel into a shared map of the output with several threads
// (io/mapped_writer): ranks' ranges meet inside pages, chunks split across threads.
TEST_F(Mpi, WriterThreadsAndChunkSizesGiveIdenticalFiles) {
  std::mt19937_64 rng(1616);
  testing::RandomSpec spec;
  spec.n = 768;
  spec.m = 16;
  spec.density = 0.5;  // 2.4 MB of C: chunks large enough to split
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a), pb = put("B.bin", b);
  const OutputRecords oracle = sparse_oracle(a, b);
  const std::vector<std::byte> expected = encode(oracle);
  const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
  for (const char* threads : {"1", "2", "8"}) {
    for (const char* chunk : {"64K", "1M"}) {
      SCOPED_TRACE(std::string(threads) + " writer threads, --chunk-size " + chunk);
      expect_identical(pa, pb, plain, {2, 3}, {"--chunk-size", chunk},
                       {std::string("BLOCKMM_WRITE_THREADS=") + threads});
    }
  }
  // pwrite (the writer before the map) gives the same bytes.
  expect_identical(pa, pb, plain, {2}, {}, {"BLOCKMM_IO=pwrite"});
}

// BLOCKMM_SIMULATE_NODES=1 makes every rank its own node, so records cross between "nodes" as
// bytes (the path of a real multi-node run); =0 is the one-node path, where ranks exchange record
// numbers and read the files themselves. Both give the plain run's file on 1-5 ranks, binary and
// HDF5, for random inputs, m = 1 and saturated sums.
const std::vector<std::vector<std::string>> kNodeModes{{"BLOCKMM_SIMULATE_NODES=0"}, {"BLOCKMM_SIMULATE_NODES=1"}};

TEST_F(Mpi, SimulatedNodesGiveIdenticalFilesBinaryAndHdf5) {
  std::mt19937_64 rng(1616);
  std::vector<std::pair<std::string, testing::RandomSpec>> cases;
  cases.emplace_back("random", testing::random_spec(rng, 24));
  testing::RandomSpec ones;
  ones.n = 200;
  ones.m = 1;
  ones.density = 0.05;
  cases.emplace_back("m = 1", ones);
  testing::RandomSpec saturating;  // every value 65535: two products already exceed 2^32 - 1
  saturating.n = 96;
  saturating.m = 3;
  saturating.density = 0.3;
  cases.emplace_back("saturating", saturating);
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m));
    InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    if (name == "saturating") {
      saturate(a);
      saturate(b);
    }
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const OutputRecords oracle = sparse_oracle(a, b);
    if (name == "saturating") {
      bool saturated = false;
      for (std::int64_t q = 0; q < oracle.size() && !saturated; ++q) saturated = oracle.values(q)[0] == 0xFFFFFFFFu;
      ASSERT_TRUE(saturated) << "the saturating case does not saturate";
    }
    const std::vector<std::byte> expected = encode(oracle);
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (const auto& env : kNodeModes) expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4, 5}), {}, env);

    // HDF5 in and out. HDF5 stamps object headers with the time (two plain runs differ in
    // those bytes), so the products are compared as their COL380 conversion, byte for byte.
    const std::string ha = in_dir + "/a.h5", hb = in_dir + "/b.h5";
    convert(pa, ha);
    convert(pb, hb);
    for (const auto& env : kNodeModes) {
      for (int n : rank_counts({1, 2, 3, 5})) {
        SCOPED_TRACE("HDF5, mpiexec -n " + std::to_string(n) + " " + env.front());
        const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
        ASSERT_TRUE(mpi_succeeded(run_mpi(n, {"-q", "--threads", "1", ha, hb, out}, env)));
        convert(out, back);
        EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product under " << n << " ranks differs from the plain run";
        std::remove(out.c_str());
        std::remove(back.c_str());
      }
    }
    std::remove(ha.c_str());
    std::remove(hb.c_str());
  }
}

// Ranks of one node share the rows at the ends of their panels (driver/shared_rows.hpp): a
// neighbour may compute them and writes them at their place in the file. BLOCKMM_SHARE_ROWS=give
// makes each rank claim its neighbours' regions before its own panel, so that most shared tiles
// are computed by the neighbour; the files must be the plain run's all the same, binary and
// HDF5, whatever the chunk size (granules follow it), and --stats says who computed what.
TEST_F(Mpi, RowsSharedWithNeighboursGiveIdenticalFiles) {
  std::mt19937_64 rng(3131);
  std::vector<std::pair<std::string, testing::RandomSpec>> cases;
  testing::RandomSpec four;
  four.n = 1020;
  four.m = 4;
  four.density = 0.03;
  four.max_value = 65535;
  cases.emplace_back("m = 4", four);
  testing::RandomSpec saturating;  // m = 8, every value 65535: sums saturate
  saturating.n = 400;
  saturating.m = 8;
  saturating.density = 0.1;
  cases.emplace_back("saturating m = 8", saturating);
  testing::RandomSpec awkward;
  awkward.n = 335;  // 67 block-rows
  awkward.m = 5;
  awkward.density = 0.08;
  awkward.zero_block_fraction = 0.1;
  cases.emplace_back("m = 5, zero blocks", awkward);
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    const CaseFiles files = case_files(name, spec, rng);
    const InputRecords &a = files.a, &b = files.b;
    const std::string &pa = files.pa, &pb = files.pb;
    const std::vector<std::byte>& plain = files.plain;
    for (const char* chunk : {"16K", "4M"}) {
      if (name != "m = 4" && std::string(chunk) == "4M") continue;  // one case covers large chunks
      SCOPED_TRACE(std::string("--chunk-size ") + chunk);
      expect_identical(pa, pb, plain, rank_counts({2, 3, 4}), {"--chunk-size", chunk}, {"BLOCKMM_SHARE_ROWS=give"});
    }
    // Who computed what: with "give", neighbours computed shared tiles; with sharing off, none.
    for (const char* mode : {"give", "0"}) {
      SCOPED_TRACE(std::string("BLOCKMM_SHARE_ROWS=") + mode);
      const std::string out = out_dir + "/C.bin";
      const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--stats=json", pa, pb, out},
                               {std::string("BLOCKMM_SHARE_ROWS=") + mode});
      ASSERT_TRUE(mpi_succeeded(m));
      EXPECT_TRUE(read_bytes(out) == plain);
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      const bool sharing = std::string(mode) == "give";
      EXPECT_EQ(j.at("shared_rows").get<bool>(), sharing);
      std::int64_t helped = 0;
      for (const auto& entry : j.at("per_rank")) helped += entry.at("tiles_for_neighbours").get<std::int64_t>();
      if (sharing) {
        EXPECT_GT(helped, 0);
      } else {
        EXPECT_EQ(helped, 0);
      }
      EXPECT_LT(helped, static_cast<std::int64_t>(sparse_oracle(a, b).size()));
      std::remove(out.c_str());
    }
    // HDF5: the products compared as their COL380 conversion (HDF5 stamps times in its headers).
    for (int n : {2, 3}) {
      SCOPED_TRACE("HDF5, mpiexec -n " + std::to_string(n));
      const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
      ASSERT_TRUE(mpi_succeeded(run_mpi(n, {"-q", "--threads", "1", "--chunk-size", "16K", pa, pb, out},
                                        {"BLOCKMM_SHARE_ROWS=give"})));
      convert(out, back);
      EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product under " << n << " ranks differs from the plain run";
      std::remove(out.c_str());
      std::remove(back.c_str());
    }
  }
}

TEST_F(Mpi, SkewedInputsGiveIdenticalFiles) {
  std::mt19937_64 rng(99);
  const InputRecords a = skewed_blocks(512, 4, 1.2, 1500, 0, 65535, rng);  // row 0 heaviest, empty tail rows
  const InputRecords b = skewed_blocks(512, 4, 0.8, 1200, 1, 1023, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
  const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
  expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  // The same with the operands swapped (then B is the skewed one) and in small chunks.
  const std::vector<std::byte> swapped = plain_product(pb, pa);
  EXPECT_TRUE(swapped == encode(sparse_oracle(b, a)));
  expect_identical(pb, pa, swapped, {2, 4}, {"--chunk-size", "1K"});
}

// A rank that drives several backends (a team: one a GPU; BLOCKMM_WORKERS runs the same paths
// with host backends) splits its rows over them, or B's block-columns into panels
// (BLOCKMM_B_PANELS; more panels than backends: streamed, built twice). Every layout gives the
// plain run's bytes: 1 to 3 ranks, nodes simulated or not, cpu and reference backends, m from 1
// to 64, skewed rows, saturation, empty rows and columns, and HDF5.
TEST_F(Mpi, TeamsOfBackendsGiveIdenticalFiles) {
  std::mt19937_64 rng(39);
  const std::vector<std::vector<std::string>> layouts{{"BLOCKMM_WORKERS=2"},
                                                      {"BLOCKMM_WORKERS=3", "BLOCKMM_B_PANELS=3"},
                                                      {"BLOCKMM_WORKERS=2", "BLOCKMM_B_PANELS=5"},
                                                      {"BLOCKMM_B_PANELS=4"}};
  struct Case {
    std::string name;
    InputRecords a, b;
  };
  std::vector<Case> cases;
  for (const std::int32_t m : {1, 5, 64}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m >= 64 ? 6 : 40);
    spec.density = 0.2;
    spec.empty_row_fraction = 0.2;
    spec.empty_col_fraction = 0.2;
    spec.zero_block_fraction = 0.1;
    cases.push_back({"m=" + std::to_string(m), testing::random_blocks(spec, rng), testing::random_blocks(spec, rng)});
  }
  cases.push_back({"skewed", skewed_blocks(512, 4, 1.2, 1500, 0, 65535, rng), skewed_blocks(512, 4, 0.8, 1200, 1, 1023, rng)});
  {
    testing::RandomSpec spec = testing::random_spec(rng, 24);
    Case c{"saturating", testing::random_blocks(spec, rng), testing::random_blocks(spec, rng)};
    saturate(c.a);
    saturate(c.b);
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string pa = put("a.bin", c.a), pb = put("b.bin", c.b);
    const std::vector<std::byte> expected = encode(sparse_oracle(c.a, c.b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (const std::vector<std::string>& layout : layouts) {
      SCOPED_TRACE(layout.back());
      for (const char* backend : {"cpu", "reference"}) {
        if (std::string(backend) == "reference" && c.name != "m=5") continue;  // the oracle is slow
        expect_identical(pa, pb, plain, rank_counts({1, 3}), {"--backend", backend}, layout);
      }
      std::vector<std::string> simulated = layout;
      simulated.push_back("BLOCKMM_SIMULATE_NODES=1");
      expect_identical(pa, pb, plain, rank_counts({2}), {}, simulated);
    }
  }
  // HDF5: the team's writes through the HDF5 writer, read back as the binary product.
  const Case& c = cases[1];
  const std::string pa = put("a.bin", c.a), pb = put("b.bin", c.b);
  const std::vector<std::byte> plain = plain_product(pa, pb);
  for (int n : rank_counts({1, 2})) {
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", pa, pb, out_dir + "/C.h5"}, {"BLOCKMM_WORKERS=3", "BLOCKMM_B_PANELS=7"});
    ASSERT_TRUE(mpi_succeeded(m));
    convert(out_dir + "/C.h5", out_dir + "/C.bin");
    EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == plain) << n << " ranks";
    std::remove((out_dir + "/C.h5").c_str());
    std::remove((out_dir + "/C.bin").c_str());
  }
}

TEST_F(Mpi, MoreRanksThanBlockRows) {
  std::mt19937_64 rng(5);
  testing::RandomSpec spec;
  spec.n = 16;
  spec.m = 4;  // 4 block-rows for 5 ranks
  spec.density = 0.7;
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::byte> plain = plain_product(pa, pb, nullptr);
  EXPECT_TRUE(plain == encode(testing::dense_product(a, b)));
  expect_identical(pa, pb, plain, {5});
  // One block-row only: four of five ranks hold nothing.
  spec.n = 7;
  spec.m = 7;
  spec.density = 1;
  const InputRecords one_a = testing::random_blocks(spec, rng), one_b = testing::random_blocks(spec, rng);
  const std::string qa = put("one_a.bin", one_a), qb = put("one_b.bin", one_b);
  const std::vector<std::byte> one = plain_product(qa, qb, nullptr);
  EXPECT_TRUE(one == encode(testing::dense_product(one_a, one_b)));
  expect_identical(qa, qb, one, {5});
}

TEST_F(Mpi, EmptyInputsGiveAHeaderOnlyFile) {
  const InputRecords empty = make_records(16, 4, {});
  const InputRecords zeros = make_records(16, 4, {{1, 1, std::vector<std::uint16_t>(16, 0)}});
  const InputRecords some =
      make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}, {1, 1, std::vector<std::uint16_t>(16, 5)}});
  const std::string pe = put("empty.bin", empty), pz = put("zeros.bin", zeros), ps = put("some.bin", some);
  const std::vector<std::byte> header_only = encode_with_header(16, 4, 0, {});
  for (const auto& [x, y] : std::vector<std::pair<std::string, std::string>>{{pe, pe}, {pe, ps}, {ps, pz}}) {
    SCOPED_TRACE(x + " x " + y);
    const std::vector<std::byte> plain = plain_product(x, y, &header_only);
    for (const auto& env : kNodeModes)
      expect_identical(x, y, plain, x == pe && y == pe ? rank_counts({1, 2, 3, 4}) : std::vector<int>{3}, {}, env);
  }
}

// Issue 17: a few hundred blocks of n = 2^27 (m = 1, 2, 4) run on compact labels of the indices
// in use; the files must be those of the oracle (over record pairs: memory by records), of the
// reference backend, and the same for 1, 2 and 3 ranks. HDF5 output at n = 2^22 (its /indptr
// holds n/m + 1 entries in the file), 1 rank and 2, read back through blockmm-convert.
TEST_F(Mpi, HugeNWithFewBlocksGivesIdenticalFiles) {
  std::mt19937_64 rng(1727);
  for (const std::int32_t m : {1, 2, 4}) {
    for (const std::int32_t n : {std::int32_t{1} << 27, std::int32_t{1} << 22}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", m = " + std::to_string(m));
      const std::int32_t p = n / m;
      std::vector<std::int32_t> pool = {0, p - 1};
      std::uniform_int_distribution<std::int32_t> any(1, p - 2);
      while (pool.size() < 20) pool.push_back(any(rng));
      const InputRecords a = blocks_among(n, m, pool, 150, rng), b = blocks_among(n, m, pool, 150, rng);
      const std::string pa = put("a.bin", a), pb = put("b.bin", b);
      const std::vector<std::byte> expected = encode(pair_oracle(a, b));
      if (n == std::int32_t{1} << 27) {
        const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
        expect_identical(pa, pb, plain, {2, 3});
        continue;
      }
      // The datasets, not the files' bytes, are compared: HDF5 stamps objects with their time.
      const std::string one = scratch / "one.h5", two = out_dir + "/two.h5";
      ASSERT_TRUE(plain_succeeded(run_blockmm({"-q", "--backend", "reference", pa, pb, one})));
      const MpiRun m2 = run_mpi(2, {"-q", "--threads", "1", pa, pb, two});
      ASSERT_TRUE(mpi_succeeded(m2));
      const std::string bin = blockmm_bin();
      for (const std::string& h5 : {one, two}) {
        const std::string back = scratch / "back.bin";
        const RunResult convert = run_process({bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert", h5, back});
        ASSERT_EQ(convert.exit_code, 0) << convert.describe();
        EXPECT_TRUE(read_bytes(back) == expected) << h5 << ": the HDF5 product differs from the oracle";
        std::remove(back.c_str());
      }
      std::remove(two.c_str());
    }
  }
}

// BLOCKMM_RELABEL=on runs the relabelled pipeline on ordinary random inputs (odd m, empty rows,
// zero blocks, saturation): every file must be the one of the plain pipeline (off), for the
// cpu and reference backends and for 1 to 3 ranks.
TEST_F(Mpi, ForcedRelabellingGivesTheSameFiles) {
  std::mt19937_64 rng(1728);
  for (int c = 0; c < 4; ++c) {
    const testing::RandomSpec spec = testing::random_spec(rng, 24);
    SCOPED_TRACE("case " + std::to_string(c) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m));
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    ::setenv("BLOCKMM_RELABEL", "off", 1);
    const std::vector<std::byte> off = plain_product(pa, pb, &expected);
    ::setenv("BLOCKMM_RELABEL", "on", 1);
    const std::vector<std::byte> on = plain_product(pa, pb, &expected);
    EXPECT_TRUE(on == off);
    expect_identical(pa, pb, off, {2, 3});
    ::unsetenv("BLOCKMM_RELABEL");
  }
}

// ---------------------------------------------------------------------------------------------
// The COL380 course data.

std::string col380_dir() { return env_or("BLOCKMM_COL380_DIR", BLOCKMM_DEFAULT_COL380_DIR); }

TEST_F(Mpi, Col380PairsGiveIdenticalFilesAndMatchTheGold) {
  const std::string dir = col380_dir();
  if (!path_exists(dir + "/pairs.tsv"))
    GTEST_SKIP() << "the shared COL380 data is absent (no " << dir << "/pairs.tsv; a user's clone has no ../shared)";
  struct Case {
    std::string a, b, gold;
  };
  // Every gold pair, an m = 8 pair without gold, and A x A from one file.
  const std::vector<Case> cases = {
      {"aniruddha-deb/test_A.mat", "aniruddha-deb/test_B.mat", "aniruddha-deb/test_C_gold.mat"},
      {"alexriderspy/m4_input1", "alexriderspy/m4_input2", "alexriderspy/m4_output1_gold"},
      {"alexriderspy/m2_input1.bin", "alexriderspy/m2_input2.bin", "alexriderspy/m2_out_true_gold.bin"},
      {"alexriderspy/m1_input1", "alexriderspy/m1_input2", "alexriderspy/m1_output1_gold"},
      {"nischaydiwan/98625ce_input1", "nischaydiwan/98625ce_input2", ""},
      {"nischaydiwan/4eeefc3_input2_n8192", "nischaydiwan/4eeefc3_input2_n8192", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a + " x " + c.b);
    const std::string pa = dir + "/" + c.a, pb = dir + "/" + c.b;
    InputRecords a, b;
    ASSERT_EQ(load(pa, a), "");
    ASSERT_EQ(load(pb, b), "");
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    if (!c.gold.empty()) {
      OutputRecords gold, got;
      ASSERT_EQ(load(dir + "/" + c.gold, gold), "");
      ASSERT_EQ(parse(plain, got), "");
      EXPECT_EQ(testing::compare_outputs(gold, got), "");
    }
    expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  }
}

// ---------------------------------------------------------------------------------------------
// Collective errors.

InputRecords medium_input(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  testing::RandomSpec spec;
  spec.n = 400;
  spec.m = 4;
  spec.density = 0.05;  // about 500 records: each rank reads a different slice
  spec.zero_value_fraction = 0;
  return testing::random_blocks(spec, rng);
}

TEST_F(Mpi, OutOfRangeIndexInTheLastRecordStopsEveryRank) {
  const InputRecords good_a = medium_input(1), good_b = medium_input(2);
  const std::int64_t last = good_a.size() - 1;
  InputRecords bad = good_a;
  set_record_index(bad.record(last), 100, record_col(bad.record(last)));  // p = 100
  const std::string pa = put("a.bin", good_a), pb = put("b.bin", good_b), pbad = put("bad.bin", bad);
  for (int n : rank_counts({2, 3, 4})) {
    SCOPED_TRACE("mpiexec -n " + std::to_string(n));
    EXPECT_TRUE(every_rank_failed(run_mpi(n, {"-q", "--threads", "1", pbad, pb, out_dir + "/C.bin"}), 3, pbad,
                                  {"record " + std::to_string(last), "100"}, out_dir));
    EXPECT_TRUE(every_rank_failed(run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"}), 3, pbad,
                                  {"record " + std::to_string(last), "100"}, out_dir));
  }
}

TEST_F(Mpi, DuplicateReadByDifferentRanksStopsEveryRank) {
  const InputRecords good_a = medium_input(3), good_b = medium_input(4);
  const std::int64_t last = good_a.size() - 1;
  InputRecords bad = good_a;
  const std::int32_t i = record_row(bad.record(0)), j = record_col(bad.record(0));
  set_record_index(bad.record(last), i, j);  // record 0 is read by rank 0, the last by the last rank
  const std::string pa = put("a.bin", good_a), pb = put("b.bin", good_b), pbad = put("dup.bin", bad);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  // The message of a plain run, word for word, on every rank count and node mode.
  const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
  ASSERT_EQ(plain.exit_code, 3) << plain.describe();
  const std::string plain_line = split_lines(plain.err).at(0);
  for (const auto& env : kNodeModes) {
    for (int n : rank_counts({2, 3, 4})) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n) + " " + env.front());
      const MpiRun left = run_mpi(n, {"-q", "--threads", "1", pbad, pb, out_dir + "/C.bin"}, env);
      EXPECT_TRUE(every_rank_failed(left, 3, pbad, {"duplicate", pair, "0", std::to_string(last)}, out_dir));
      const MpiRun right = run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"}, env);
      EXPECT_TRUE(every_rank_failed(right, 3, pbad, {"duplicate", pair, "0", std::to_string(last)}, out_dir));
      EXPECT_NE(right.run.err.find(plain_line), std::string::npos) << "not the plain run's message: " << plain_line
                                                                   << "\n" << right.describe();
    }
  }
}

// Files named blockmm-* in /dev/shm that are there now and still a second later.
std::vector<std::string> lasting_shared_files() {
  const auto list = [] {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec))
      if (entry.path().filename().string().rfind("blockmm-", 0) == 0) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> first = list();
  if (first.empty()) return first;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::vector<std::string> second = list();
  std::vector<std::string> both;
  std::set_intersection(first.begin(), first.end(), second.begin(), second.end(), std::back_inserter(both));
  return both;
}

// Ranks of one node that each need all of B read one copy of it, read and built by the node's
// first rank alone (driver/shared_right_operand.hpp): the plain run's bytes on 2-4 ranks (m = 8,
// m = 3 with zero blocks, m = 1, and saturating sums), --stats says so (and what each rank read
// of B), and it is off with
// BLOCKMM_SHARE_B=0, with one node a rank, and where ranks need only part of B (a banded A); a
// duplicate in B stops every rank with the plain run's message.
TEST_F(Mpi, RanksOfANodeReadOneSharedB) {
  std::mt19937_64 rng(2121);
  // Dense enough that every rank's A rows reach every row of B.
  const auto dense = [](std::int32_t n, std::int32_t m, double density) {
    testing::RandomSpec spec;
    spec.n = n;
    spec.m = m;
    spec.density = density;
    return spec;
  };
  const testing::RandomSpec eight = dense(8 * 48, 8, 0.5);
  testing::RandomSpec three = dense(3 * 61, 3, 0.6);
  three.zero_block_fraction = 0.1;
  three.max_value = 1023;
  const std::vector<std::pair<std::string, testing::RandomSpec>> cases = {
      {"m = 8", eight}, {"m = 3, zero blocks", three}, {"m = 1", dense(300, 1, 0.5)}, {"saturating m = 8", dense(8 * 30, 8, 0.7)}};
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    const CaseFiles files = case_files(name, spec, rng);
    const std::string &pa = files.pa, &pb = files.pb;
    const std::vector<std::byte>& plain = files.plain;
    expect_identical(pa, pb, plain, rank_counts({2, 3, 4}));
    struct Mode {
      std::vector<std::string> env;
      bool shared;
    };
    const Mode modes[] = {{{}, true}, {{"BLOCKMM_SHARE_B=0"}, false}, {{"BLOCKMM_SIMULATE_NODES=1"}, false}};
    for (const Mode& mode : modes) {
      for (int n : rank_counts({2, 3})) {
        SCOPED_TRACE("mpiexec -n " + std::to_string(n) + (mode.env.empty() ? "" : " " + mode.env.front()));
        const std::string out = out_dir + "/C.bin";
        const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out}, mode.env);
        ASSERT_TRUE(mpi_succeeded(m)) << m.describe();
        EXPECT_TRUE(read_bytes(out) == plain);
        nlohmann::json j;
        ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
        EXPECT_EQ(j.at("b_shared_on_node").get<bool>(), mode.shared);
        // Sharing, only the node's first rank reads B; otherwise every rank holds all of it: the
        // file's records where it scans the file, the non-zero blocks the owners send across nodes.
        const bool across_nodes = !mode.env.empty() && mode.env.front() == "BLOCKMM_SIMULATE_NODES=1";
        const auto b_records = j.at("blocks").at(across_nodes ? "b_nonzero_used" : "b_records").get<std::int64_t>();
        for (const nlohmann::json& rank : j.at("per_rank")) {
          const std::int64_t expected = mode.shared && rank.at("rank").get<int>() > 0 ? 0 : b_records;
          EXPECT_EQ(rank.at("b_records").get<std::int64_t>(), expected) << "rank " << rank.at("rank");
        }
        std::remove(out.c_str());
        // The shared copy has no name in /dev/shm (comm/node_shared_memory.hpp): none outlives a
        // run (names seen twice a second apart, so that another program's passing file is not
        // counted; tests/e2e/mpi/node_memory_test.cpp checks that none is made at all).
        EXPECT_EQ(lasting_shared_files(), std::vector<std::string>{});
      }
    }
  }
  // A banded A: each rank needs only the rows of B near its panel, whose counts may agree; every
  // rank builds its own B, and the bytes are the plain run's.
  {
    SCOPED_TRACE("banded A");
    const std::int32_t m = 4, p = 60;
    std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> band, full;
    for (int i = 0; i < p; ++i) {
      for (int j = std::max(0, i - 1); j <= std::min(p - 1, i + 1); ++j)
        band.emplace_back(i, j, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(1 + (i * 7 + j) % 1000)));
      for (int j = 0; j < p; j += 3)
        full.emplace_back(i, j, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(1 + (i + j) % 500)));
    }
    const InputRecords a = testing::make_records(m * p, m, band), b = testing::make_records(m * p, m, full);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (int n : rank_counts({2, 3, 4})) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n));
      const std::string out = out_dir + "/C.bin";
      const MpiRun run = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out});
      ASSERT_TRUE(mpi_succeeded(run)) << run.describe();
      EXPECT_TRUE(read_bytes(out) == plain);
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(run.run.out)) << run.run.out;
      EXPECT_FALSE(j.at("b_shared_on_node").get<bool>());
      std::remove(out.c_str());
    }
  }
  // A duplicate in B: the plain run's message from every rank.
  const InputRecords good_a = testing::random_blocks(eight, rng);
  InputRecords bad_b = testing::random_blocks(eight, rng);
  const std::int64_t last = bad_b.size() - 1;
  const std::int32_t i = record_row(bad_b.record(0)), j = record_col(bad_b.record(0));
  set_record_index(bad_b.record(last), i, j);
  const std::string pa = put("a.bin", good_a), pbad = put("dup.bin", bad_b);
  const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
  ASSERT_EQ(plain.exit_code, 3) << plain.describe();
  const std::string plain_line = split_lines(plain.err).at(0);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  for (int n : rank_counts({2, 3})) {
    SCOPED_TRACE("duplicate in B, mpiexec -n " + std::to_string(n));
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
    EXPECT_TRUE(every_rank_failed(m, 3, pbad, {"duplicate", pair}, out_dir));
    EXPECT_NE(m.run.err.find(plain_line), std::string::npos) << m.describe();
  }
}

// Ranks whose backend builds whole inputs (driver/whole_inputs.hpp: the cuda backend's path on a
// GPU node, taken here by the reference backend, BLOCKMM_WHOLE_INPUTS=1): the plain run's bytes
// on 2-4 ranks, binary and HDF5 out, no input moved between ranks, and a duplicate in either
// input stops every rank with the plain run's message.
TEST_F(Mpi, RanksBuildingWholeInputsGiveIdenticalFiles) {
  std::mt19937_64 rng(1414);
  const std::vector<std::string> whole{"BLOCKMM_WHOLE_INPUTS=1"};
  const std::vector<std::string> reference{"--backend", "reference"};
  testing::RandomSpec saturating;  // every value 65535
  saturating.n = 96;
  saturating.m = 3;
  saturating.density = 0.3;
  std::vector<std::pair<InputRecords, InputRecords>> cases;
  const testing::RandomSpec spec = testing::random_spec(rng, 24);
  cases.emplace_back(testing::random_blocks(spec, rng), testing::random_blocks(spec, rng));
  cases.emplace_back(medium_input(21), medium_input(22));
  cases.emplace_back(testing::random_blocks(saturating, rng), testing::random_blocks(saturating, rng));
  saturate(cases.back().first);
  saturate(cases.back().second);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const std::string pa = put("a.bin", cases[c].first), pb = put("b.bin", cases[c].second);
    const std::vector<std::byte> expected = encode(sparse_oracle(cases[c].first, cases[c].second));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    expect_identical(pa, pb, plain, rank_counts({2, 3, 4}), reference, whole);
    if (c != 1) continue;
    // HDF5 out, compared as its COL380 conversion (HDF5 stamps times into object headers).
    const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
    ASSERT_TRUE(mpi_succeeded(run_mpi(3, {"-q", "--threads", "1", "--backend", "reference", pa, pb, out}, whole)));
    convert(out, back);
    EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product differs from the plain run";
    std::remove(out.c_str());
    std::remove(back.c_str());
    // --stats: the method, nothing moved, the ranks' work adding up to the product's.
    for (const bool on : {true, false}) {
      const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--backend", "reference", "--stats=json", pa, pb,
                                   out_dir + "/C.bin"}, on ? whole : std::vector<std::string>{"BLOCKMM_WHOLE_INPUTS=0"});
      ASSERT_TRUE(mpi_succeeded(m));
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      EXPECT_EQ(j.at("distribution"), on ? "whole inputs on every rank" : "rows scanned from the files");
      for (const char* where : {"within_node", "between_nodes"})
        for (const char* what : {"records", "index"}) EXPECT_EQ(j.at("input_bytes_moved").at(where).at(what), 0);
      std::int64_t work = 0;
      for (const auto& rank : j.at("per_rank")) work += rank.at("work").get<std::int64_t>();
      EXPECT_EQ(work, j.at("block_products").get<std::int64_t>());
      std::remove((out_dir + "/C.bin").c_str());
    }
  }
  // A duplicate block in A, then in B: every rank stops with the plain run's line, nothing written.
  const InputRecords good = medium_input(23);
  InputRecords bad = good;
  const std::int32_t i = record_row(bad.record(0)), j = record_col(bad.record(0));
  set_record_index(bad.record(bad.size() - 1), i, j);
  const std::string pgood = put("good.bin", good), pbad = put("dup.bin", bad);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  for (const bool in_a : {true, false}) {
    const std::string pa = in_a ? pbad : pgood, pb = in_a ? pgood : pbad;
    const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pb, out_dir + "/C.bin"});
    ASSERT_EQ(plain.exit_code, 3) << plain.describe();
    const std::string plain_line = split_lines(plain.err).at(0);
    for (int n : rank_counts({2, 3})) {
      SCOPED_TRACE(std::string(in_a ? "A" : "B") + ", mpiexec -n " + std::to_string(n));
      const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--backend", "reference", pa, pb, out_dir + "/C.bin"}, whole);
      EXPECT_TRUE(every_rank_failed(m, 3, pbad, {"duplicate", pair, "0", std::to_string(bad.size() - 1)}, out_dir));
      EXPECT_NE(m.run.err.find(plain_line), std::string::npos) << "not the plain run's message: " << plain_line << "\n"
                                                               << m.describe();
    }
  }
}

TEST_F(Mpi, HeaderAndOutputErrorsStopEveryRank) {
  const InputRecords a = medium_input(5);
  testing::RandomSpec other;
  other.n = 404;
  other.m = 4;
  std::mt19937_64 rng(6);
  const std::string pa = put("a.bin", a), pother = put("other.bin", testing::random_blocks(other, rng));
  std::vector<std::byte> truncated = encode(a);
  truncated.resize(truncated.size() - 3);
  const std::string ptrunc = in_dir + "/truncated.bin";
  write_bytes(ptrunc, truncated);
  const std::string out = out_dir + "/C.bin";
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, pother, out}), 3, pother, {pa}, out_dir));
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, ptrunc, out}), 3, ptrunc, {"truncated"}, out_dir));
  const std::string nowhere = out_dir + "/missing/C.bin";
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, pa, nowhere}), 4, nowhere, {}, out_dir));
}

// ---------------------------------------------------------------------------------------------
// --stats under several ranks.

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
