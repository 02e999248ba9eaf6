// What a run measured: phase times, block counts, work and its balance, bytes moved. Printed
// by --stats as text or JSON; phase times are the slowest rank's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace blockmm::driver {

struct PhaseTimes {
  double read = 0;       // inspect and read this rank's share of A and B
  double exchange = 0;   // work estimate, ranges, block exchange
  double build = 0;      // CSR / CSC
  double setup = 0;      // backend start (CUDA context, unless overlapped with reading)
  double symbolic = 0;
  double numeric = 0;    // numeric phase including the overlapped writes
  double numeric_compute = 0;  // of which the kernels were busy (device time for cuda)
  double write = 0;      // time inside the writer (overlapped with numeric where possible)
  double commit = 0;     // sync, close, rename
  double total = 0;
};

struct InputDescription {
  std::string path;
  std::string format;       // "binary" or "hdf5"
  std::int64_t bytes = 0;   // file size
};

struct RunStats {
  // The run itself, for a JSON record that stands alone (filled by main and run_product).
  std::string version;
  std::vector<std::string> command_line;
  std::vector<InputDescription> inputs;
  std::string output_path;
  std::string host;                       // rank 0's host name
  std::string started_utc;                // ISO 8601, e.g. 2026-11-24T23:05:12Z
  std::vector<std::string> rank_devices;  // what ran each rank's numeric phase (GPU names for cuda)
  std::vector<std::string> start_settings;  // "NAME=value" blockmm set before MPI and CUDA started (main.cpp)

  std::string backend;
  std::string device;
  std::string output_format;
  // How the output was written (io::OutputReport): part files of an HDF5 output (0: one file),
  // through shared maps or not and by how many threads (rank 0's), the whole 2 MiB extents of
  // every rank put in huge folios and all of them, and what decides huge pages on its tmpfs.
  int output_parts = 0;
  bool output_mapped = false;
  int output_threads = 1;
  std::int64_t output_huge_extents = 0;
  std::int64_t output_extents = 0;
  std::string output_tmpfs;
  int ranks = 1;
  int threads = 1;
  std::int32_t n = 0;
  std::int32_t m = 0;
  std::int64_t a_records = 0;  // records in the files
  std::int64_t b_records = 0;
  std::int64_t a_blocks = 0;   // non-zero blocks used
  std::int64_t b_blocks = 0;
  std::int64_t c_blocks = 0;
  std::int64_t block_products = 0;
  std::int64_t output_bytes = 0;
  PhaseTimes slowest;                       // per phase, the max over ranks
  std::vector<PhaseTimes> per_rank;
  std::vector<std::int64_t> rank_work;      // block products per rank
  std::vector<std::int64_t> rank_rows;      // block-rows per rank
  std::vector<std::int64_t> rank_bytes_exchanged;
  // Rows shared with the neighbours (driver/shared_rows.hpp): the output tiles of its
  // neighbours' panels each rank computed.
  bool shared_rows = false;
  // The ranks of each node read one copy of B (driver/shared_right_operand.hpp).
  bool b_shared_on_node = false;
  // B's records each rank read or received (none on the other ranks of a node sharing B, where
  // its first rank scans the files).
  std::vector<std::int64_t> rank_b_records;
  // How the ranks came by their records (partition::DistributionMethod, in words).
  std::string distribution = "one rank";
  std::vector<std::int64_t> rank_tiles_for_neighbours;
  // Input moved through MPI, summed over the ranks that sent it (partition::ExchangeCounters):
  // record bytes and index bytes (the block-rows asked for), within a node and between nodes.
  // Ranks all on one node move neither.
  int nodes = 1;
  bool nodes_simulated = false;  // BLOCKMM_SIMULATE_NODES: every rank its own node
  std::int64_t record_bytes_within_node = 0;
  std::int64_t record_bytes_between_nodes = 0;
  std::int64_t index_bytes_within_node = 0;
  std::int64_t index_bytes_between_nodes = 0;
  double imbalance = 1;                     // max/mean of rank_work
  std::int64_t numeric_chunks = 0;
  std::map<std::string, double> backend_steps;  // rank 0's backend steps (Backend::step_seconds)

  std::int64_t useful_macs() const { return block_products * std::int64_t{m} * m * m; }
};

std::string stats_text(const RunStats& stats);
std::string stats_json(const RunStats& stats);

// 1234567 -> "1,234,567".
std::string with_thousands(std::int64_t value);

// The current time in UTC, ISO 8601 to the second.
std::string utc_now_iso8601();

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace blockmm::driver
