// What the hdf5 suite's tests share (hdf5_test.cpp, hdf5_inputs_test.cpp, hdf5_refusals_test.cpp):
// blockmm-convert and mpiexec runs, the checks of a run's success and clean failure, the named
// awkward shapes, a small input to craft files from, and the Hdf5 fixture's scratch folders.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "e2e/hdf5/bsr_files.hpp"
#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {

#ifndef BLOCKMM_MPIEXEC_PATH
#define BLOCKMM_MPIEXEC_PATH "mpiexec"
#endif

// blockmm-convert is built beside blockmm.
inline std::string convert_bin() {
  const std::string bin = blockmm_bin();
  return env_or("BLOCKMM_CONVERT", bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert");
}

inline std::string mpiexec_bin() { return env_or("BLOCKMM_MPIEXEC", BLOCKMM_MPIEXEC_PATH); }

// OpenMPI refuses root without these (CI runs as root); harmless otherwise.
inline RunOptions with_mpi_env() {
  RunOptions options;
  options.set_env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  return options;
}

inline RunResult run_convert(const std::vector<std::string>& args) {
  std::vector<std::string> argv{convert_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

inline RunResult run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{mpiexec_bin(), "-n", std::to_string(ranks), "--oversubscribe", blockmm_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options = with_mpi_env();
  options.set_env.insert(options.set_env.end(), env.begin(), env.end());
  return run_process(argv, options);
}

inline ::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

// A failed run: `code`, one stderr line "<tool>: error: <file>: ..." holding `fragment`, and
// `dir` empty (no output, no temporary file). Under mpiexec the launcher adds lines of its own,
// so there the message need only be among them.
inline ::testing::AssertionResult failed_cleanly(const RunResult& run, int code, const std::string& prefix,
                                                 const std::string& file, const std::string& fragment,
                                                 const std::string& dir, bool one_line = true) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << run.describe(); };
  if (run.exit_code != code) return failure("expected exit code " + std::to_string(code));
  const std::vector<std::string> lines = message_lines(run.err);  // besides the log's header
  if (one_line && lines.size() != 1) return failure("expected one message line on stderr");
  const std::string head = prefix + ": error: " + file + ": ";
  const bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.rfind(head, 0) == 0 && line.find(fragment) != std::string::npos;
  });
  if (!found) return failure("no stderr line starts with '" + head + "' and holds '" + fragment + "'");
  if (!list_dir(dir).empty()) return failure("the output directory is not empty");
  return ::testing::AssertionSuccess();
}

inline testing::RandomSpec spec_of(std::int32_t n, std::int32_t m, double density, double empty_rows = 0.0) {
  testing::RandomSpec s;
  s.n = n;
  s.m = m;
  s.density = density;
  s.empty_row_fraction = empty_rows;
  return s;
}

// The named awkward shapes first (m = 1, odd m, k = 0, empty rows), then random ones.
inline std::vector<testing::RandomSpec> specs(std::mt19937_64& rng, int random_count) {
  std::vector<testing::RandomSpec> out = {
      spec_of(7, 1, 0.3),        spec_of(15, 3, 0.4, 0.3), spec_of(25, 5, 0.5),      spec_of(16, 4, 0.0),
      spec_of(40, 4, 0.2, 0.5),  spec_of(9, 9, 1.0),       spec_of(34, 17, 0.75),    spec_of(64, 8, 0.1, 0.2),
  };
  for (int q = 0; q < random_count; ++q) out.push_back(testing::random_spec(rng, 20));
  return out;
}

class Hdf5 : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-hdf5"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");
  std::string work = scratch.subdir("work");

  template <typename Value>
  std::string put(const std::string& name, const RecordBuffer<Value>& records) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, encode(records));
    return path;
  }
};

// A small input for crafted files: n = 16, m = 4 (p = 4): row 0 holds columns 0 and 3, rows 1 and 2 are empty, row 3 holds 0..3.
// Two ranks split the six blocks 3 + 3, inside row 3.
inline InputRecords base_matrix() {
  std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> blocks;
  const std::pair<int, int> where[] = {{0, 0}, {0, 3}, {3, 0}, {3, 1}, {3, 2}, {3, 3}};
  std::uint16_t v = 1;
  for (const auto& [i, j] : where) {
    std::vector<std::uint16_t> values(16);
    for (auto& x : values) x = v++;
    blocks.emplace_back(i, j, values);
  }
  return make_records(16, 4, blocks);
}

}  // namespace blockmm::e2e
