// Command-line options of the blockmm executable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "console/progress.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "settings/settings.hpp"

namespace blockmm::driver {

enum class StatsMode { off, text, json };
using console::ProgressRequest;

// Everything one run of blockmm was asked to do: its command line and its environment's
// settings, each read once, here.
struct Options {
  std::string a_path;
  std::string b_path;
  std::string out_path;
  std::optional<kernels::BackendKind> backend;  // none: auto
  io::OutputFormat format = io::OutputFormat::binary;  // resolved from --format and OUT's name
  std::string parts = "auto";     // auto | off | N: HDF5 output in part files (docs/output.md)
  int threads = 0;                // 0: OMP_NUM_THREADS, else cores shared among a node's ranks
  int gpus = 0;                   // GPUs this process drives; 0: every GPU it may use
  bool gpus_given = false;        // --gpus on the command line (else the run may take fewer: driver/backend_choice.hpp)
  StatsMode stats = StatsMode::off;
  std::string stats_file;         // JSON stats also written here (by rank 0)
  bool verbose = false;           // errors also name their internal cause
  ProgressRequest progress = ProgressRequest::automatic;  // none with --quiet
  bool quiet = false;
  std::int64_t chunk_bytes = std::int64_t{256} << 20;
  std::int64_t mem_budget = 0;    // device memory budget a GPU; 0 = automatic
  std::int64_t host_memory = 0;   // host memory a rank may hold; 0 = its share of the node's available memory
  settings::Settings settings;    // the environment's BLOCKMM_* variables and the like
  std::vector<std::string> command_line;  // argv as given, for the log header and the stats
  std::string batch_file;                 // --batch: several products (driver/batch.hpp)
  std::vector<std::string> products;      // --product, each one line of a batch
  std::string batch_origin;               // a batch's product: where it came from ("FILE:LINE")
};

// Parses argv, and the environment through `environment`. Returns false when the process should
// exit with `exit_code` (--help, --version, usage errors; messages printed where `print`, and the
// usage error's text kept in `usage_error` where given).
bool parse_options(int argc, char** argv, const settings::Lookup& environment, Options& options, int& exit_code,
                   bool print, std::string* usage_error = nullptr);

// The --help text's list of environment variables (settings::table()).
std::string environment_help();

// "256M", "8G", "1048576" -> bytes. Throws UsageError naming `option` ("--chunk-size").
std::int64_t parse_size(const std::string& text, const std::string& option);

// The name in `known` closest to `typed` (edit distance, or a unique prefix), or "" when none
// is close enough to be a likely typo.
std::string closest_name(const std::string& typed, const std::vector<std::string>& known);

// `blockmm --version`: version, commit and the build's features, one per line.
std::string version_text();

}  // namespace blockmm::driver
