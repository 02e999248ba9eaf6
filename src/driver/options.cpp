#include "driver/options.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <iostream>

#include "core/error.hpp"
#include "core/thread_limit.hpp"

#ifndef BLOCKMM_VERSION
#define BLOCKMM_VERSION "unknown"
#endif

namespace blockmm::driver {

std::int64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  long double value = 0;
  try {
    value = std::stold(text, &used);
  } catch (const std::exception&) {
    throw UsageError("cannot read size '" + text + "' (examples: 512M, 8G, 1048576)");
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();
  long double scale = 1;
  if (unit == "K") scale = 1024.0L;
  else if (unit == "M") scale = 1024.0L * 1024;
  else if (unit == "G") scale = 1024.0L * 1024 * 1024;
  else if (unit == "T") scale = 1024.0L * 1024 * 1024 * 1024;
  else if (!unit.empty()) throw UsageError("cannot read size '" + text + "' (unit must be K, M, G or T)");
  const long double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 9.2e18L) throw UsageError("size '" + text + "' is out of range");
  return static_cast<std::int64_t>(bytes);
}

bool parse_options(int argc, char** argv, Options& options, int& exit_code, bool print) {
  CLI::App app{"blockmm: exact block-sparse matrix product C = A x B (uint16 blocks in, saturated uint32 out).\n"
               "Run under mpirun/srun to distribute output block-rows over ranks (one rank per GPU)."};
  app.set_version_flag("--version", std::string("blockmm ") + BLOCKMM_VERSION);
  app.add_option("A", options.a_path, "left input (COL380 binary)")->required();
  app.add_option("B", options.b_path, "right input (COL380 binary)")->required();
  app.add_option("OUT", options.out_path, "output: COL380 binary, or HDF5 (BSR) when it ends in .h5/.hdf5")->required();
  app.add_option("--backend", options.backend, "auto | cpu | cuda | reference (auto: cuda when a GPU is visible and the work repays it)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "reference"}))
      ->capture_default_str();
  app.add_option("--format", options.format, "output format: auto (by extension) | bin | h5")
      ->check(CLI::IsMember({"auto", "bin", "h5"}))
      ->capture_default_str();
  app.add_option("--threads", options.threads, "OpenMP threads per rank, at most 1024 (default: OMP_NUM_THREADS, or the cores shared among the node's ranks)")
      ->check(CLI::NonNegativeNumber);
  std::string stats = "off";
  app.add_option("--stats", stats, "print phase times and counts: text, or json for machines")
      ->expected(0, 1)
      ->default_str("text")
      ->check(CLI::IsMember({"off", "text", "json"}));
  app.add_option("--stats-file", options.stats_file, "also write the JSON stats to this file");
  app.add_flag("-q,--quiet", options.quiet, "no progress display");
  std::string chunk = "256M";
  app.add_option("--chunk-size", chunk, "output bytes computed per chunk (host)")->capture_default_str();
  std::string budget;
  app.add_option("--mem-budget", budget, "device memory the cuda backend may use (default: a safe fraction of free memory)");
  app.footer(
      "Exit codes: 0 success, 2 usage, 3 bad input, 4 output or I/O failure, 5 out of memory or device failure, 1 other.\n"
      "Environment: BLOCKMM_MPI=0|1 forces MPI off/on (default: on when started by an MPI launcher).");

  try {
    app.parse(argc, argv);
    // "--stats" alone yields the default "text"; absent leaves "off".
    if (app.count("--stats") > 0 && stats == "off") stats = "off";
    options.stats = stats == "json" ? StatsMode::json : stats == "text" ? StatsMode::text : StatsMode::off;
    options.chunk_bytes = parse_size(chunk);
    if (!budget.empty()) options.mem_budget = parse_size(budget);
    // Before anything exists: libgomp dies without a word when it cannot create a team.
    check_thread_count(options.threads, "--threads");
    if (options.threads == 0) check_omp_num_threads_environment();
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : static_cast<int>(ExitCode::usage);
    if (print) {
      if (e.get_exit_code() == 0) {
        app.exit(e);
      } else {
        std::cerr << "blockmm: error: " << e.what() << "\n" << "Run with --help for more information.\n";
      }
    }
    return false;
  } catch (const UsageError& e) {
    exit_code = static_cast<int>(ExitCode::usage);
    if (print) std::cerr << "blockmm: error: " << e.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace blockmm::driver
