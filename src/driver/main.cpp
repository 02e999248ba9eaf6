// blockmm: exact block-sparse C = A x B. Usage: README.md and docs/running.md; design: docs/design.md.
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
#include "driver/options.hpp"
#include "driver/run.hpp"
#include "driver/run_stats.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/library_guard.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  using blockmm::ExitCode;
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
  blockmm::io::LibraryGuard::set_metadata_timeout_seconds(options.settings.library_timeout);

  // What MPI starts with where the user chose nothing (comm/mpi_start.hpp), and what CUDA starts
  // with: the GPUs it is to see where that is known, one work queue (kernels/cuda_start.hpp), set
  // while this is the only thread: CUDA's driver then loads beside MPI_Init (and the launcher's
  // wire-up) where a GPU is likely.
  const blockmm::comm::CommunicatorOptions comm_options = blockmm::comm::communicator_options(options.settings, placement);
  const bool uses_mpi = blockmm::comm::mpi_will_start(comm_options.mode, placement);
  std::vector<std::string> start_settings = blockmm::comm::apply_mpi_start_settings(uses_mpi, environment);
  const bool gpu_likely = blockmm::driver::cuda_likely(options, blockmm::driver::input_file_bytes(options));
  if (gpu_likely)
    for (const std::string& setting : blockmm::driver::apply_cuda_start_settings(options, placement, uses_mpi, environment))
      start_settings.push_back(setting);
  blockmm::kernels::CudaStart cuda(gpu_likely && blockmm::kernels::cuda_device_may_exist(environment("CUDA_VISIBLE_DEVICES")));
  blockmm::driver::ProcessStart start{cuda, gpu_likely, start_settings, environment};
  std::unique_ptr<blockmm::comm::Communicator> comm;
  try {
    comm = std::make_unique<blockmm::comm::Communicator>(comm_options, &argc, &argv);
  } catch (const blockmm::Error& e) {
    report(e.what());
    return static_cast<int>(e.code());
  }

  try {
    // Never write over an input, nor the stats over the product (exit 2, nothing written). The
    // stats file is created (and its space reserved) before the work, so that it cannot fail
    // after the product has replaced the old output; every rank learns of a failure.
    comm->run_phase([&] {
      blockmm::io::check_not_an_input(options.out_path, "output", {options.a_path, options.b_path});
      if (options.stats_file.empty()) return;
      blockmm::io::check_not_an_input(options.stats_file, "--stats-file", {options.a_path, options.b_path});
      blockmm::io::check_distinct_outputs(options.out_path, options.stats_file, "--stats-file");
    });
    // Its writer is opened now too: after the product's commit only writing into the reserved
    // space, a sync and a rename are left. The reservation covers the command line's bytes six
    // times over (a control character is written \u00XX, a byte that is not UTF-8 as two bytes).
    std::unique_ptr<blockmm::io::AtomicOutput> stats_file;
    std::unique_ptr<blockmm::io::FileWriter> stats_writer;
    if (!options.stats_file.empty()) {
      stats_file = std::make_unique<blockmm::io::AtomicOutput>(options.stats_file, *comm);
      std::int64_t argument_bytes = 0;
      for (int a = 0; a < argc; ++a) argument_bytes += static_cast<std::int64_t>(std::strlen(argv[a]));
      comm->run_phase([&] {
        stats_file->reserve((std::int64_t{64} << 10) + std::int64_t{1024} * comm->size() + 6 * argument_bytes);
      });
      comm->run_phase([&] { stats_writer = stats_file->open_writer(); });
    }
    // A run on its own ends with _Exit below: what the run holds is left to the kernel.
#ifndef __SANITIZE_ADDRESS__
    const bool ends_at_once = !comm->uses_mpi();
#else
    const bool ends_at_once = false;
#endif
    blockmm::driver::KeptUntilExit kept_until_exit;
    blockmm::driver::RunStats stats =
        blockmm::driver::run_product(options, *comm, start, ends_at_once ? &kept_until_exit : nullptr);
    const std::string version = blockmm::driver::version_text();
    stats.version = version.substr(0, version.find('\n'));  // "blockmm X.Y.Z (commit ...)"
    stats.command_line = options.command_line;
    // The stats on stdout: a write that fails (a full disk, /dev/full, a closed pipe) is an output
    // failure (exit 4) that every rank agrees on, not a success with the stats lost.
    comm->run_phase([&] {
      if (!comm->is_root()) return;
      if (options.stats == blockmm::driver::StatsMode::text) std::cout << blockmm::driver::stats_text(stats);
      if (options.stats == blockmm::driver::StatsMode::json) std::cout << blockmm::driver::stats_json(stats) << "\n";
      blockmm::io::flush_standard_output(" (the product " + options.out_path + " was written)");
    });
    if (stats_file) {
      const std::string json = blockmm::driver::stats_json(stats) + "\n";
      comm->run_phase([&] {
        if (comm->is_root()) {
          stats_writer->write_at(0, json.data(), static_cast<std::int64_t>(json.size()));
          stats_file->set_size(static_cast<std::int64_t>(json.size()));
        }
        stats_writer->sync_and_close();
      });
      stats_file->commit();
    }
#ifndef __SANITIZE_ADDRESS__  // (sanitizer builds keep the exit handlers: LeakSanitizer runs in them)
    if (!comm->uses_mpi()) {
      // A run on its own ends here at once: the product is committed and durable, the stats are
      // out. The exit handlers would only tear down the CUDA context and libraries, which the
      // kernel does anyway (0.05-0.07 s of teardown on the H100 machine, bench/NOTES.md).
      std::cout.flush();
      std::fflush(nullptr);
      std::_Exit(0);
    }
#endif
    return 0;
  } catch (const blockmm::Error& e) {
    // Errors are agreed on by every rank (same code, same message); rank 0 reports, and no rank
    // exits before it has (a launcher may end the job at the first non-zero exit).
    if (comm->is_root()) report(e.what());
    try {
      comm->barrier();
    } catch (...) {
    }
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    report("out of memory");
    comm->abort(static_cast<int>(ExitCode::resource));
  } catch (const std::system_error& e) {
    // A thread that could not be started (EAGAIN) is a resource failure like std::bad_alloc.
    const bool resource = e.code() == std::errc::resource_unavailable_try_again;
    report(((resource ? "cannot start a thread: " : "") + std::string(e.what())).c_str());
    comm->abort(static_cast<int>(resource ? ExitCode::resource : ExitCode::other));
  } catch (const std::exception& e) {
    report(e.what());
    comm->abort(static_cast<int>(ExitCode::other));
  }
}
