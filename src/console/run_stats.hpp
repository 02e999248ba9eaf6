// console: what a run shows its user (progress.hpp has the module's summary). This file: the
// --stats record of a run and its text and JSON forms.
//
// What a run measured: phase times, block counts, work and its balance, bytes moved. Printed
// by --stats as text or JSON; phase times are the slowest rank's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "multiply/report.hpp"

namespace blockmm::console {

using multiply::PhaseTimes;

struct InputDescription {
  std::string path;
  std::string format;       // "binary" or "hdf5"
  std::int64_t bytes = 0;   // file size
};

// The product's report (multiply::Report) and the run around it.
struct RunStats : multiply::Report {
  // The run itself, for a JSON record that stands alone (filled by main and run_product).
  std::string version;
  std::vector<std::string> command_line;
  std::vector<InputDescription> inputs;
  std::string output_path;
  std::string host;                       // rank 0's host name
  std::string started_utc;                // ISO 8601, e.g. 2026-11-24T23:05:12Z
  std::vector<std::string> start_settings;  // "NAME=value" blockmm set before MPI and CUDA started (main.cpp)
  std::vector<std::string> settings;        // "NAME=value" of the BLOCKMM_* variables given (settings/)
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
  int nodes = 1;
  bool nodes_simulated = false;  // BLOCKMM_SIMULATE_NODES: every rank its own node
  std::int64_t output_bytes = 0;
  PhaseTimes slowest;                       // per phase, the max over ranks
  std::vector<PhaseTimes> per_rank;
};

std::string stats_text(const RunStats& stats);
std::string stats_json(const RunStats& stats);

// 1234567 -> "1,234,567".
std::string with_thousands(std::int64_t value);

// The current time in UTC, ISO 8601 to the second.
std::string utc_now_iso8601();

}  // namespace blockmm::console
