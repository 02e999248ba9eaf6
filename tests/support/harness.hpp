// Test harness for the end-to-end suites and the module tests that start processes or read
// crafted files: runs the real blockmm (or mpiexec) as a child process, crafts COL380 files
// byte by byte, parses files without the project's own readers, and computes the product with
// an oracle independent of src/kernels.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/block_matrix.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {

// ---------- environment and scratch space ----------

// Value of an environment variable, or `fallback` when unset or empty.
std::string env_or(const char* name, const std::string& fallback = "");

// $BLOCKMM_BIN (set by CTest through BLOCKMM_TEST_ENV). Fails the calling test when unset.
std::string blockmm_bin();

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "blockmm-e2e");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Creates (and returns) a subdirectory.
  std::string subdir(const std::string& name) const;

 private:
  std::string path_;
};

// ---------- child processes ----------

struct RunResult {
  int exit_code = -1;      // exit status, or 128 + signal
  bool timed_out = false;  // killed by the harness's own deadline
  std::string out;         // stdout
  std::string err;         // stderr
  double seconds = 0;
  std::string describe() const;  // exit code, stdout and stderr, for failure messages
};

struct RunOptions {
  double timeout_seconds = 120;
  std::string cwd;  // empty: inherit
  // Strip the variables by which an MPI launcher is detected, so that a plain run stays plain
  // even when the test itself was started under a launcher.
  bool strip_launcher_env = true;
  std::vector<std::string> set_env;  // "NAME=value"
};

// Starts argv[0] (an absolute path, or a name looked up in PATH) in its own process group: stdin
// from /dev/null, stdout and stderr into the given files, the environment as `options` says
// (timeout_seconds is the caller's to enforce). Returns the pid.
pid_t spawn_process(const std::vector<std::string>& argv, const RunOptions& options, const std::string& out_path,
                    const std::string& err_path);

// Runs argv[0] with the arguments to its end or its deadline.
RunResult run_process(const std::vector<std::string>& argv, const RunOptions& options = {});

// Runs blockmm with `args`.
RunResult run_blockmm(const std::vector<std::string>& args, const RunOptions& options = {});

// Lines of `text` (a final newline does not start an extra empty line).
std::vector<std::string> split_lines(const std::string& text);

// ---------- files ----------

std::vector<std::byte> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<std::byte>& bytes);
void write_text(const std::string& path, const std::string& text);
bool path_exists(const std::string& path);  // lstat: links count too
// Dates `path`'s last change (mtime and atime) back by `seconds`; false where it cannot. The
// stale-temporary sweep leaves alone what changed in its last 600 s (io/stale_temporaries.hpp):
// tests make a leftover older than that.
bool date_back(const std::string& path, long seconds);
// Names in a directory, sorted, hidden ones included ("." and ".." excluded).
std::vector<std::string> list_dir(const std::string& dir);

// COL380 bytes: header (n, m, k) then the records as stored. `k` defaults to the record count;
// a different value crafts a lying header.
template <typename Value>
std::vector<std::byte> encode(const RecordBuffer<Value>& records);
std::vector<std::byte> encode_with_header(std::int32_t n, std::int32_t m, std::int32_t k,
                                          const std::vector<std::byte>& record_bytes);

// Parses a COL380 file of `Value`s independently of src/io. Returns "" on success, else why not.
template <typename Value>
std::string parse(const std::vector<std::byte>& bytes, RecordBuffer<Value>& out);
template <typename Value>
std::string load(const std::string& path, RecordBuffer<Value>& out);

// "" when `out` is sorted strictly by (i, j), every index lies in [0, p) and no block is all zero.
std::string check_canonical(const OutputRecords& out);

// ---------- inputs and the oracle ----------

using testing::make_records;  // fixed cases (support/random_blocks.hpp)

// Power-law rows: block-row i holds about total * (i+1)^-alpha / sum blocks (at least
// `min_per_row`, at most p), row 0 heaviest; distinct random columns; values in [1, max_value]
// so that no block is all zero; records shuffled.
InputRecords skewed_blocks(std::int32_t n, std::int32_t m, double alpha, std::int64_t total_blocks,
                           std::int32_t min_per_row, std::uint32_t max_value, std::mt19937_64& rng);

// C = A x B, exact: uint64 sums per value, saturated at 2^32 - 1 at the end; all-zero blocks
// dropped; sorted by (i, j). Row-by-row Gustavson over the records, sharing no code with
// src/kernels or src/partition. Inputs must be valid (no duplicates).
OutputRecords sparse_oracle(const InputRecords& a, const InputRecords& b);

// The same product by another route, for huge n: every pair of records A(i,k) B(k,j) summed into
// a map keyed by (i, j), so that memory follows the records, never n (sparse_oracle's arrays
// follow p). Saturated, all-zero blocks dropped, sorted by (i, j).
OutputRecords pair_oracle(const InputRecords& a, const InputRecords& b);

// `count` distinct random blocks of an n x n matrix of m x m blocks whose indices come from
// `indices` (block indices; both ends of [0, p) belong there to reach the edges); values in
// [0, 65535], about one block in eight all zero, some near 65535 so that sums saturate.
InputRecords blocks_among(std::int32_t n, std::int32_t m, const std::vector<std::int32_t>& indices, std::int64_t count,
                          std::mt19937_64& rng);

// Block products per output block-row: sum over non-zero A(i,k) of the non-zero blocks in B's row k.
std::vector<std::int64_t> row_products(const InputRecords& a, const InputRecords& b);

// max / mean of per-part work for contiguous `bounds` (parts + 1 entries); 1 when there is no work.
double imbalance_of(const std::vector<std::int64_t>& row_work, const std::vector<std::int64_t>& bounds);

}  // namespace blockmm::e2e
