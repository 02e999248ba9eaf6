#include "driver/options.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "core/error.hpp"
#include "comm/launcher.hpp"
#include "io/product_writer.hpp"
#include "core/thread_limit.hpp"

namespace blockmm::driver {

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The MPI library blockmm runs with. MPI_Get_library_version is one of the few calls MPI
// allows before MPI_Init (MPI-3.0), so --version stays quick and never starts MPI.
std::string mpi_library_text() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS || length <= 0) return "unknown";
  std::string line(text, static_cast<std::size_t>(std::min(length, MPI_MAX_LIBRARY_VERSION_STRING - 1)));
  line = line.substr(0, line.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

}  // namespace

std::string closest_name(const std::string& typed, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& name : known) {
    const std::size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  // A typo is a few edits away; allow more for long names ("--chunksize" -> "--chunk-size").
  const std::size_t allowed = std::max<std::size_t>(2, typed.size() / 4);
  if (!best.empty() && best_distance <= allowed) return best;
  std::string prefixed;
  for (const std::string& name : known) {
    if (typed.size() >= 3 && name.compare(0, typed.size(), typed) == 0) {
      if (!prefixed.empty()) return "";  // ambiguous
      prefixed = name;
    }
  }
  return prefixed;
}

std::string version_text() {
  std::string text = std::string("blockmm ") + BLOCKMM_VERSION + " (commit " + BLOCKMM_GIT_COMMIT + ")\n";
  if (BLOCKMM_BUILD_CUDA)
    text += std::string("CUDA: built with CUDA ") + BLOCKMM_BUILD_CUDA_VERSION + " for sm_" + BLOCKMM_BUILD_CUDA_ARCHS + "\n";
  else
    text += "CUDA: not built (cpu and reference backends only)\n";
  text += "MPI: " + mpi_library_text() + "\n";
  text += std::string("HDF5: ") + BLOCKMM_BUILD_HDF5_VERSION + (BLOCKMM_BUILD_HDF5_PARALLEL ? " (parallel)" : " (serial)") + "\n";
  text += "OpenMP: " + std::to_string(_OPENMP) + "\n";
  text += "License: BSD-3-Clause";
  return text;
}

std::int64_t parse_size(const std::string& text, const std::string& option) {
  const std::string named = option + " '" + quoted_value(text) + "'";
  const std::string examples = " (examples: 512M, 8G, 1048576)";
  std::size_t used = 0;
  long double value = 0;
  try {
    value = std::stold(text, &used);
  } catch (const std::exception&) {
    throw UsageError(named + ": not a size" + examples);
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
  else if (!unit.empty()) throw UsageError(named + ": the unit must be K, M, G or T" + examples);
  const long double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 9.2e18L) throw UsageError(named + ": out of range (1 byte to 8E)" + examples);
  return static_cast<std::int64_t>(bytes);
}

namespace {

// A launcher's rank count given to blockmm ("blockmm -n 2 A B OUT": CLI11 said "arguments were
// not expected: OUT -n"): what it is and where it goes. "" where the words hold none.
std::string launcher_option_hint(const std::vector<std::string>& words) {
  for (std::size_t i = 1; i < words.size() && words[i] != "--"; ++i) {
    const std::string& word = words[i];
    if (word != "-n" && word != "-np" && word != "--np" && word != "-N") continue;
    const bool counted = i + 1 < words.size() && !words[i + 1].empty() && words[i + 1].size() <= 6 &&
                         words[i + 1].find_first_not_of("0123456789") == std::string::npos;
    const std::string count = counted ? words[i + 1] : "N";
    return "'" + word + (counted ? " " + count : "") +
           "' is not a blockmm option: ranks come from a launcher, e.g. mpirun -np " + count + " blockmm A B OUT";
  }
  return "";
}

// CLI11's message, or for an unknown option the closest known one ("--thread" -> "--threads").
std::string usage_message(const CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& words) {
  if (const std::string hint = launcher_option_hint(words); !hint.empty()) return hint;
  std::vector<std::string> known;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
  }
  for (const std::string& arg : app.remaining()) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    const std::string suggestion = closest_name(name, known);
    return "unknown option '" + quoted_value(name) + "'" +
           (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?");
  }
  return quoted_value(error.what(), 2 * kQuotedValueBytes);  // CLI11 quotes the value given
}

}  // namespace

std::string environment_help() {
  std::string text = "Environment (docs/environment.md has every variable):\n";
  for (const settings::Variable& v : settings::table())
    if (v.audience == settings::Audience::user) text += std::string("  ") + v.name + "=" + v.values + "  " + v.meaning + "\n";
  text += "  Developer settings for tests and comparisons:";
  int column = 100;
  for (const settings::Variable& v : settings::table()) {
    if (v.audience != settings::Audience::developer) continue;
    const std::string name = std::string(" ") + v.name;
    if (column + name.size() > 96) {
      text += "\n   ";
      column = 3;
    }
    text += name;
    column += static_cast<int>(name.size());
  }
  return text;
}

bool parse_options(int argc, char** argv, const settings::Lookup& environment, Options& options, int& exit_code,
                   bool print, std::string* usage_error) {
  CLI::App app{"blockmm: exact block-sparse matrix product C = A x B (uint16 blocks in, saturated uint32 out).\n"
               "Run under mpirun/srun to distribute output block-rows over ranks (GPU nodes: one rank a node,\n"
               "driving its GPUs)."};
  app.name("blockmm");
  // An option given twice takes its last value, so that a job script's defaults can be
  // overridden by options appended after them.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the usage line and the man page name the program, not the path it was run by
  app.set_version_flag("--version", [] { return version_text(); });
  app.add_option("A", options.a_path, "left input: COL380 binary, or HDF5 (BSR), told by its signature");
  app.add_option("B", options.b_path, "right input: COL380 binary, or HDF5 (BSR), told by its signature");
  app.add_option("OUT", options.out_path, "output: COL380 binary, or HDF5 (BSR) when it ends in .h5/.hdf5");
  app.add_option("--batch", options.batch_file,
                 "several products in one run, one start: a file (or - for standard input) of lines "
                 "'[options] A B OUT'; a line's options override the run's")
      ->option_text("FILE");
  app.add_option("--product", options.products, "one product of a batch, '[options] A B OUT' (repeatable)")
      ->option_text("'A B OUT'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::string backend = "auto", format = "auto", progress = "auto", gpus = "all";
  app.add_option("--backend", backend, "auto | cpu | cuda | reference (auto: cuda when a GPU is visible and the work repays it)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "reference"}))
      ->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs this process drives: a count, or all (default: every GPU it may use, one for a "
                                 "product too small for more to pay; under mpirun the node's GPUs are shared among "
                                 "its ranks)")
      ->option_text("N|all");
  app.add_option("--format", format, "output format: auto (by extension) | bin | h5 (also: binary, hdf5)")
      ->check(CLI::IsMember({"auto", "bin", "binary", "h5", "hdf5"}))
      ->capture_default_str();
  app.add_option("--parts", options.parts,
                 "HDF5 output in part files beside OUT, written at once: auto (on tmpfs from 1 GiB where huge folios "
                 "cannot be had), off, or a count (docs/output.md)")
      ->option_text("auto|off|N")
      ->capture_default_str();
  std::string threads = "0";
  app.add_option("--threads", threads, "OpenMP threads per rank, 0 to 1024 (default 0: OMP_NUM_THREADS, or the cores shared among the node's ranks)")
      ->option_text("N");
  std::string stats = "off";
  app.add_option("--stats", stats, "print phase times and counts after the run: text (--stats alone) or json; off by default")
      ->expected(0, 1)
      ->default_str("text")
      ->check(CLI::IsMember({"off", "text", "json"}))
      ->option_text("[=text|json]");  // not "=text": that is what --stats alone means, not the default
  app.add_option("--stats-file", options.stats_file, "also write the JSON stats to this file")->option_text("FILE");
  app.add_option("--progress", progress,
                 "auto | bar | lines | none (auto: a bar on a terminal, else a plain line every few seconds)")
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}))
      ->capture_default_str();
  app.add_flag("-q,--quiet", options.quiet, "no progress display (same as --progress none)");
  app.add_flag("-v,--verbose", options.verbose, "errors also name their internal cause (a failed library call)");
  std::string chunk = "256M";
  app.add_option("--chunk-size", chunk, "output bytes computed per chunk before it is written (K, M, G, T suffixes)")
      ->option_text("SIZE=256M");
  std::string budget;
  app.add_option("--mem-budget", budget, "device memory the cuda backend may use, e.g. 40G (default: 80% of the free memory)")
      ->option_text("SIZE");
  std::string host_memory;
  app.add_option("--host-memory", host_memory,
                 "host memory a rank may hold, e.g. 16G; a larger B is read from its file in panels (default: the "
                 "node's available memory shared by its ranks)")
      ->option_text("SIZE");
  app.footer(
      "Inputs may be COL380 binary or HDF5 (scipy BSR layout); the output is HDF5 when it ends in .h5/.hdf5.\n"
      "Exit codes: 0 success, 1 other failure, 2 usage, 3 bad input, 4 output or I/O failure, 5 out of memory or\n"
      "device failure.\n" +
      environment_help());

  // The files are optional positionals (a batch names none), so CLI11 would let a bare
  // "--stats" swallow the file after it; it means --stats=text unless a mode follows.
  std::vector<std::string> words(argv, argv + argc);
  for (std::size_t i = 1; i < words.size() && words[i] != "--"; ++i) {
    const bool mode_follows = i + 1 < words.size() &&
                              (words[i + 1] == "off" || words[i + 1] == "text" || words[i + 1] == "json");
    if (words[i] == "--stats" && !mode_follows) words[i] = "--stats=text";
  }
  std::vector<char*> arguments;
  for (std::string& word : words) arguments.push_back(word.data());

  try {
    app.parse(static_cast<int>(arguments.size()), arguments.data());
    // "--stats" alone yields the default "text"; absent leaves "off".
    if (app.count("--stats") > 0 && stats == "off") stats = "off";
    options.stats = stats == "json" ? StatsMode::json : stats == "text" ? StatsMode::text : StatsMode::off;
    options.command_line.assign(argv, argv + argc);
    const bool batch = !options.batch_file.empty() || !options.products.empty();
    const int files = !options.a_path.empty() + !options.b_path.empty() + !options.out_path.empty();
    if (batch && files > 0) throw UsageError("give the products of a batch in it (--batch, --product), not as A B OUT");
    if (!batch && files < 3) throw UsageError("three files are needed: A B OUT (or --batch FILE)");
    options.chunk_bytes = parse_size(chunk, "--chunk-size");
    (void)io::output_policy({}, 1, options.parts);  // a bad --parts is a usage error before anything starts
    // Before anything exists: libgomp dies without a word when it cannot create a team.
    options.threads = parse_thread_count(threads, "--threads");
    options.settings = settings::Settings::read(environment);
    if (!budget.empty()) options.mem_budget = parse_size(budget, "--mem-budget");
    if (!host_memory.empty()) options.host_memory = parse_size(host_memory, "--host-memory");
    if (backend != "auto") options.backend = kernels::parse_backend_kind(backend);
    options.progress = options.quiet || progress == "none" ? ProgressRequest::none
                       : progress == "bar"                ? ProgressRequest::bar
                       : progress == "lines"              ? ProgressRequest::lines
                                                          : ProgressRequest::automatic;
    options.gpus_given = app.count("--gpus") > 0;
    if (gpus != "all") {
      const int count = comm::parse_count(gpus.c_str());
      if (count < 1 || count > 1024)
        throw UsageError("--gpus '" + quoted_value(gpus) + "': expected a count from 1 to 1024, or all");
      options.gpus = count;
    }
    options.format = io::choose_output_format(options.out_path, format);
    const std::string warning =
        batch ? std::string() : io::output_name_warning(options.out_path, options.format, "--format " + format);
    if (!warning.empty() && print) std::cerr << "blockmm: warning: " << escape_control_characters(warning) << "\n";
    if (!batch && options.format == io::OutputFormat::binary && options.parts != "auto" && options.parts != "off" && print)
      std::cerr << "blockmm: warning: --parts applies to HDF5 output; " << escape_control_characters(options.out_path)
                << " is written as one binary file\n";
    if (options.threads == 0) check_omp_num_threads(options.settings.omp_num_threads);
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : static_cast<int>(ExitCode::usage);
    if (print) {
      if (e.get_exit_code() == 0) {
        app.exit(e);
      } else {
        // One line, as every error: the pointer to --help rides on it.
        std::cerr << "blockmm: error: " << escape_control_characters(usage_message(app, e, words))
                  << " (see blockmm --help)\n";
      }
    }
    if (usage_error != nullptr)
      *usage_error = e.get_exit_code() == 0 ? "--help or --version" : usage_message(app, e, words);
    return false;
  } catch (const UsageError& e) {
    exit_code = static_cast<int>(ExitCode::usage);
    if (print) std::cerr << "blockmm: error: " << escape_control_characters(e.what()) << "\n";
    if (usage_error != nullptr) *usage_error = e.what();
    return false;
  }
  return true;
}

}  // namespace blockmm::driver
