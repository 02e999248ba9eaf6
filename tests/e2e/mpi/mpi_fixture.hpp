// What the mpi suite's tests of blockmm under mpiexec share (mpi_test.cpp, distribution_test.cpp,
// stats_test.cpp): runs through mpirun_blockmm.sh with every rank's exit code, the checks of a job
// that succeeded or failed on every rank, the rank counts a build sweeps, saturated and medium
// inputs, and the Mpi fixture, which checks each case's plain run and compares runs under mpiexec
// with it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {

// The rank counts a test sweeps. Under AddressSanitizer (CI's second pass over the suite,
// which looks for memory errors, not rank-count coverage) every rank's start costs about a
// second, so that build keeps the smallest several-rank count and the largest of the list; the
// release build runs them all.
inline std::vector<int> rank_counts(std::vector<int> all) {
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
inline void saturate(InputRecords& x) {
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
inline MpiRun run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
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

inline int count_error_lines(const std::string& err) {
  int count = 0;
  for (const std::string& line : split_lines(err)) count += line.find("blockmm: error:") != std::string::npos;
  return count;
}

inline ::testing::AssertionResult mpi_succeeded(const MpiRun& m) {
  const bool ok = m.run.exit_code == 0 && !m.run.timed_out && count_error_lines(m.run.err) == 0 &&
                  std::all_of(m.rank_codes.begin(), m.rank_codes.end(), [](int c) { return c == 0; });
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected every rank to succeed\n" << m.describe();
}

inline ::testing::AssertionResult plain_succeeded(const RunResult& run) {
  if (run.exit_code == 0 && run.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

// Every rank exited with `code` within `max_seconds`, one "blockmm: error:" line naming `file`
// and each fragment, and `out_dir` is empty: no output, no temporary file.
inline ::testing::AssertionResult every_rank_failed(const MpiRun& m, int code, const std::string& file,
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

// BLOCKMM_SIMULATE_NODES=1 makes every rank its own node, so records cross between "nodes" as
// bytes (the path of a real multi-node run); =0 is the one-node path, where ranks exchange record
// numbers and read the files themselves. Both give the plain run's file on 1-5 ranks, binary and
// HDF5, for random inputs, m = 1 and saturated sums.
inline const std::vector<std::vector<std::string>> kNodeModes{{"BLOCKMM_SIMULATE_NODES=0"}, {"BLOCKMM_SIMULATE_NODES=1"}};

inline InputRecords medium_input(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  testing::RandomSpec spec;
  spec.n = 400;
  spec.m = 4;
  spec.density = 0.05;  // about 500 records: each rank reads a different slice
  spec.zero_value_fraction = 0;
  return testing::random_blocks(spec, rng);
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

}  // namespace blockmm::e2e
