// Command-line options of the blockmm executable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace blockmm::driver {

enum class StatsMode { off, text, json };

struct Options {
  std::string a_path;
  std::string b_path;
  std::string out_path;
  std::string backend = "auto";   // auto | cpu | cuda | reference
  std::string format = "auto";    // auto | bin | h5
  std::string parts = "auto";     // auto | off | N: HDF5 output in part files (docs/output.md)
  int threads = 0;                // 0: OMP_NUM_THREADS, else cores shared among a node's ranks
  StatsMode stats = StatsMode::off;
  std::string stats_file;         // JSON stats also written here (by rank 0)
  bool quiet = false;
  bool verbose = false;           // errors also name their internal cause
  std::string progress = "auto";  // auto | bar | lines | none
  double progress_interval = 5;   // seconds between progress lines (BLOCKMM_PROGRESS_INTERVAL)
  std::int64_t chunk_bytes = std::int64_t{256} << 20;
  std::int64_t mem_budget = 0;    // device memory budget; 0 = automatic
};

// Parses argv. Returns false when the process should exit with `exit_code` (--help, --version,
// usage errors; messages already printed).
bool parse_options(int argc, char** argv, Options& options, int& exit_code, bool print);

// "256M", "8G", "1048576" -> bytes. Throws UsageError.
std::int64_t parse_size(const std::string& text);

// The name in `known` closest to `typed` (edit distance, or a unique prefix), or "" when none
// is close enough to be a likely typo.
std::string closest_name(const std::string& typed, const std::vector<std::string>& known);

// `blockmm --version`: version, commit and the build's features, one per line.
std::string version_text();

}  // namespace blockmm::driver
