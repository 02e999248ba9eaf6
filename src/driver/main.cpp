// blockmm: exact block-sparse C = A x B. Usage: README.md and docs/running.md; design: docs/design.md.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <iostream>
#include <new>
#include <system_error>

#include "comm/communicator.hpp"
#include "comm/launcher.hpp"
#include "comm/mpi_start.hpp"
#include "core/error.hpp"
#include "driver/backend_choice.hpp"
#include "driver/batch.hpp"
#include "driver/options.hpp"
#include "driver/run.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/library_guard.hpp"
#include "io/same_file.hpp"
#include "kernels/cuda_start.hpp"
#include "settings/settings.hpp"

namespace {

void report(const char* what) {
  std::fprintf(stderr, "blockmm: error: %s\n", blockmm::escape_control_characters(what).c_str());
}

// Under a launcher every rank finds the same usage error, but only rank 0 prints it, and the
// launcher ends the job at the first rank that exits non-zero: a rank that exits before rank 0
// has printed would take the only message with it. So the ranks meet in a barrier (after rank
// 0 has printed) before any of them exits. Costs an MPI_Init, on this error path only. The
// settings may be what failed: MPI then starts as the launcher says.
void hold_until_every_rank_has_reported(int* argc, char*** argv, const blockmm::comm::LauncherPlacement& placement,
                                        const blockmm::settings::Lookup& environment) {
  std::fflush(stderr);
  std::cerr.flush();
  blockmm::comm::CommunicatorOptions c;
  c.mode = blockmm::comm::MpiMode::automatic;
  c.placement = placement;
  if (!blockmm::comm::mpi_will_start(c.mode, placement)) return;
  try {
    blockmm::comm::apply_mpi_start_settings(true, environment);
    const blockmm::comm::Communicator comm(c, argc, argv);
    comm.barrier();
  } catch (...) {
    // No MPI to meet in: nothing better than exiting.
  }
}

// Under a launcher of more than one rank every rank reads the batch itself, before MPI starts:
// only a regular file reads the same on each. Standard input (`-`, or a name for it such as
// /dev/stdin) reaches rank 0 alone (mpirun and srun give the others /dev/null or nothing), and a
// FIFO gives each rank a part or makes it wait: the ranks would disagree on the products and wait
// for each other for ever. Refused alike on every rank, from the name and the file's type alone.
void check_every_rank_reads_the_batch(const std::string& path, const blockmm::comm::LauncherPlacement& placement) {
  const int ranks = placement.open_mpi_size >= 0 ? placement.open_mpi_size : placement.slurm_step_tasks;
  if (!placement.launched || ranks == 1) return;
  struct stat st {};
  std::string why;
  if (path == "-" || !blockmm::io::descriptor_link(path).empty())
    why = "standard input reaches only the first rank under a launcher (mpirun, srun)";
  else if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    why = "not a regular file (a pipe or device reads differently on each rank)";
  if (!why.empty())
    throw blockmm::UsageError("--batch " + path + ": " + why + "; with several ranks, give the batch as a file " +
                              "every rank can read (or --product '...' options)");
}

// The products of a batch: each line parsed after the run's own options (driver/batch.hpp).
// Throws UsageError naming the line that is not a product.
std::vector<blockmm::driver::Options> batch_products(int argc, char** argv, const blockmm::driver::Options& run,
                                                     const blockmm::settings::Lookup& environment,
                                                     const blockmm::comm::LauncherPlacement& placement) {
  if (!run.stats_file.empty())
    throw blockmm::UsageError("--stats-file names one file: in a batch, give each product its own, on its line");
  if (!run.batch_file.empty()) check_every_rank_reads_the_batch(run.batch_file, placement);
  const std::vector<std::string> common = blockmm::driver::arguments_without_batch(argc, argv);
  std::vector<blockmm::driver::Options> products;
  // Each line parsed as it is read: a file that is no batch fails at its first line.
  const auto parse = [&](const blockmm::driver::BatchLine& line) {
    std::vector<std::string> words{argv[0]};
    words.insert(words.end(), common.begin(), common.end());
    words.insert(words.end(), line.words.begin(), line.words.end());
    std::vector<char*> args;
    for (std::string& w : words) args.push_back(w.data());
    blockmm::driver::Options product;
    int exit_code = 0;
    // The line's errors are told with its origin, in one line.
    std::string why;
    if (!blockmm::driver::parse_options(static_cast<int>(args.size()), args.data(), environment, product, exit_code, false,
                                        &why))
      throw blockmm::UsageError(line.origin + ": " + why + " (the line: " + blockmm::driver::joined(line.words) + ")");
    if (!product.batch_file.empty() || !product.products.empty())
      throw blockmm::UsageError(line.origin + ": a batch's product cannot hold a batch");
    product.batch_origin = line.origin;
    products.push_back(std::move(product));
  };
  if (!run.batch_file.empty())
    blockmm::driver::read_batch_file(run.batch_file, [&](blockmm::driver::BatchLine&& line) { parse(line); });
  for (std::size_t p = 0; p < run.products.size(); ++p)
    parse({blockmm::driver::split_words(run.products[p], "--product " + std::to_string(p + 1)),
           "--product " + std::to_string(p + 1)});
  // Products run one after the other: one that wrote where another of the batch writes (its
  // output or its --stats-file) would be lost without a word. Refused before any runs.
  std::vector<std::string> outputs;
  std::vector<std::pair<std::size_t, const char*>> owners;  // product, "output" or "--stats-file"
  for (std::size_t p = 0; p < products.size(); ++p) {
    outputs.push_back(products[p].out_path);
    owners.emplace_back(p, "output");
    if (products[p].stats_file.empty()) continue;
    outputs.push_back(products[p].stats_file);
    owners.emplace_back(p, "--stats-file");
  }
  const auto [first, second] = blockmm::io::first_repeated_output(outputs);
  if (second < outputs.size())
    throw blockmm::UsageError(products[owners[second].first].batch_origin + ": the " + owners[second].second + " " +
                              outputs[second] + " is also the " + owners[first].second + " of " +
                              products[owners[first].first].batch_origin +
                              " (the same file); each product of a batch writes its own files");
  // Nor does one write over the batch it is read from (a product's own inputs: run.cpp).
  if (!run.batch_file.empty()) {
    const std::vector<std::string> batch{run.batch_file == "-" ? "/dev/stdin" : run.batch_file};
    for (std::size_t o = 0; o < outputs.size(); ++o)
      if (blockmm::io::input_written_by(outputs[o], batch).input == 0)
        throw blockmm::UsageError(products[owners[o].first].batch_origin + ": the " + owners[o].second + " " +
                                  outputs[o] + " is the batch file " +
                                  (run.batch_file == "-" ? "(standard input)" : run.batch_file) +
                                  " (the same file); blockmm never writes over its inputs");
  }
  return products;
}

}  // namespace

int main(int argc, char** argv) {
  blockmm::io::install_cleanup_handlers();

  // The environment, read once (settings/), and the command line. Usage errors need no MPI:
  // decide them before starting it (each rank sees the same argv, so every rank reaches the same
  // verdict; only the first prints).
  const blockmm::settings::Lookup environment = blockmm::settings::process_environment();
  const blockmm::comm::LauncherPlacement placement = blockmm::comm::launcher_placement(environment);
  blockmm::driver::Options options;
  int exit_code = 0;
  const bool quiet_rank = placement.rank > 0;
  if (!blockmm::driver::parse_options(argc, argv, environment, options, exit_code, !quiet_rank)) {
    if (exit_code == 0 && !quiet_rank) {  // --help, --version: the text must have reached stdout
      try {
        blockmm::io::flush_standard_output();
      } catch (const blockmm::Error& e) {
        report(e.what());
        return static_cast<int>(e.code());
      }
    }
    if (exit_code != 0) hold_until_every_rank_has_reported(&argc, &argv, placement, environment);
    return exit_code;
  }
  // The products: this command line's, or a batch's, each parsed as a command line of its own.
  std::vector<blockmm::driver::Options> products;
  if (options.batch_file.empty() && options.products.empty()) {
    products.push_back(options);
  } else {
    try {
      products = batch_products(argc, argv, options, environment, placement);
    } catch (const blockmm::Error& e) {
      if (!quiet_rank) report(e.what());
      hold_until_every_rank_has_reported(&argc, &argv, placement, environment);
      return static_cast<int>(e.code());
    } catch (const std::bad_alloc&) {
      if (!quiet_rank) report(("out of memory reading the batch " + options.batch_file).c_str());
      return static_cast<int>(blockmm::ExitCode::resource);
    }
  }
  blockmm::io::LibraryGuard::set_metadata_timeout_seconds(options.settings.library_timeout);

  // What MPI starts with where the user chose nothing (comm/mpi_start.hpp), and what CUDA starts
  // with: the GPUs it is to see where that is known, one work queue (kernels/cuda_start.hpp), set
  // while this is the only thread: CUDA's driver then loads beside MPI_Init (and the launcher's
  // wire-up) where a GPU is likely (for any product of a batch).
  const blockmm::comm::CommunicatorOptions comm_options = blockmm::comm::communicator_options(options.settings, placement);
  const bool uses_mpi = blockmm::comm::mpi_will_start(comm_options.mode, placement);
  std::vector<std::string> start_settings = blockmm::comm::apply_mpi_start_settings(uses_mpi, environment);
  bool gpu_likely = false;
  for (const blockmm::driver::Options& product : products)
    gpu_likely = gpu_likely || blockmm::driver::cuda_likely(product, blockmm::driver::input_file_bytes(product));
  // On its own, a small product drives one GPU unless --gpus asks for more.
  if (gpu_likely && !uses_mpi && products.size() == 1)
    options.gpus = products[0].gpus = blockmm::driver::automatic_gpu_count(products[0]);
  if (gpu_likely)
    for (const std::string& setting : blockmm::driver::apply_cuda_start_settings(options, placement, uses_mpi, environment))
      start_settings.push_back(setting);
  blockmm::kernels::CudaStart cuda(gpu_likely && blockmm::kernels::cuda_device_may_exist(environment("CUDA_VISIBLE_DEVICES")));
  blockmm::driver::ProcessStart start{cuda, gpu_likely, start_settings, environment, {}};
  std::unique_ptr<blockmm::comm::Communicator> comm;
  try {
    comm = std::make_unique<blockmm::comm::Communicator>(comm_options, &argc, &argv);
  } catch (const blockmm::Error& e) {
    report(e.what());
    return static_cast<int>(e.code());
  }

  // A run on its own ends with _Exit below: what its last product holds is left to the kernel.
#ifndef __SANITIZE_ADDRESS__
  const bool ends_at_once = !comm->uses_mpi();
#else
  const bool ends_at_once = false;
#endif
  blockmm::driver::KeptUntilExit kept_until_exit;
  int first_failure = 0;
  std::size_t failed = 0;
  for (std::size_t p = 0; p < products.size(); ++p) {
    const bool last = p + 1 == products.size();
    const int code = blockmm::driver::run_and_report(products[p], *comm, start,
                                                     ends_at_once && last ? &kept_until_exit : nullptr);
    if (code != 0) {
      ++failed;
      if (first_failure == 0) first_failure = code;
    }
  }
  if (products.size() > 1 && comm->is_root() && (failed > 0 || !options.quiet))
    std::fprintf(stderr, "blockmm: batch: %zu of %zu products written%s\n", products.size() - failed, products.size(),
                 failed > 0 ? ("; the first failure's exit code is " + std::to_string(first_failure)).c_str() : "");
#ifndef __SANITIZE_ADDRESS__  // (sanitizer builds keep the exit handlers: LeakSanitizer runs in them)
  if (!comm->uses_mpi()) {
    // A run on its own ends here at once: the products are committed and durable, the stats are
    // out. The exit handlers would only tear down the CUDA context and libraries, which the
    // kernel does anyway, at a cost a short run would notice.
    std::cout.flush();
    std::fflush(nullptr);
    std::_Exit(first_failure);
  }
#endif
  return first_failure;
}
