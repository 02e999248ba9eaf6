#include "driver/run.hpp"

#include <omp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <system_error>
#include <thread>

#include "backends/choice.hpp"
#include "console/progress.hpp"
#include "core/error.hpp"
#include "driver/backend_choice.hpp"
#include "driver/cores.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/input_file.hpp"
#include "io/mapped_writer.hpp"
#include "io/product_writer.hpp"
#include "io/same_file.hpp"
#include "multiply/multiply.hpp"

namespace blockmm::driver {
namespace {

using multiply::PhaseTimes;

// Starts the OpenMP team now, before the temporary output exists: libgomp ends the process
// (exit 1, its own message, the temporary file left behind) when it cannot create a thread.
// Threads of the same stack size are tried first, so that a shortage (a memory or thread limit)
// is a ResourceError (exit 5) instead; libgomp then keeps its team for the run's regions.
void start_thread_team(int threads) {
  if (threads <= 1) return;
  std::vector<pthread_t> started;
  int failed = 0;
  for (int t = 1; t < threads && failed == 0; ++t) {
    pthread_t thread;
    failed = ::pthread_create(&thread, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
    if (failed == 0) started.push_back(thread);
  }
  for (pthread_t thread : started) ::pthread_join(thread, nullptr);
  if (failed != 0)
    throw ResourceError("cannot start " + std::to_string(threads) + " threads (" + std::strerror(failed) +
                        "): lower --threads or raise the memory or process limit");
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp atomic
    ++team;
  }
  (void)team;
}

// The product's phases on rank 0's progress display; where a test asks (BLOCKMM_TEST_PAUSE=numeric),
// a stop as the numeric phase starts, the output begun, for a signal to land there.
class ProgressObserver final : public multiply::Observer {
 public:
  ProgressObserver(console::Progress& progress, bool pause_at_numeric)
      : progress_(progress), pause_at_numeric_(pause_at_numeric) {}
  void phase_started(multiply::Phase phase) override {
    if (phase == multiply::Phase::numeric && pause_at_numeric_) {
      std::fprintf(stderr, "blockmm: test: the numeric phase starts, its output begun; pausing\n");
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    switch (phase) {
      case multiply::Phase::read: progress_.phase("reading inputs"); break;
      case multiply::Phase::exchange: progress_.phase("partitioning"); break;
      case multiply::Phase::build: progress_.phase("building operands"); break;
      case multiply::Phase::setup: progress_.phase("starting the backend"); break;
      case multiply::Phase::symbolic: progress_.phase("symbolic"); break;
      case multiply::Phase::numeric: break;  // counting() names it
      case multiply::Phase::commit: progress_.phase("committing output"); break;
    }
  }
  void counting(std::int64_t tiles, double macs_per_tile) override {
    progress_.counted_phase("multiplying", tiles, macs_per_tile);
  }
  std::atomic<std::int64_t>* tile_counter() override { return &progress_.counter(); }
  void tiles_done(std::int64_t done) override { progress_.at_least(done); }
  void backend_chosen(const std::string& name) override { progress_.set_backend(name); }

 private:
  console::Progress& progress_;
  bool pause_at_numeric_;
};

// The host memory a rank may hold: --host-memory, else the node's available memory (the
// kernel's MemAvailable) shared by its ranks. The least of every rank's, so that all plan alike;
// 0 (no bound) where any rank cannot tell.
std::int64_t rank_host_memory(std::int64_t asked, const comm::Communicator& comm) {
  std::int64_t mine = asked;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; mine == 0 && std::getline(meminfo, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) mine = kib * 1024 / std::max(1, comm.node_size());
  }
  return -comm.max(-mine);
}

multiply::Options multiply_options(const Options& options, int threads, const comm::Communicator& comm,
                                   KeptUntilExit* kept_until_exit) {
  multiply::Options m = backends::product_options(options.settings, options.chunk_bytes, threads);
  m.host_memory = rank_host_memory(options.host_memory, comm);
  m.host_memory_asked = options.host_memory > 0;
  m.kept_until_exit = kept_until_exit;
  return m;
}

// Per-rank phase times, gathered for --stats (collective).
void gather_phase_times(const PhaseTimes& mine, const comm::Communicator& comm, console::RunStats& stats) {
  double PhaseTimes::*const phases[] = {&PhaseTimes::read,    &PhaseTimes::exchange,        &PhaseTimes::build,
                                        &PhaseTimes::setup,   &PhaseTimes::symbolic,        &PhaseTimes::numeric,
                                        &PhaseTimes::numeric_compute, &PhaseTimes::write,   &PhaseTimes::commit,
                                        &PhaseTimes::total};
  stats.per_rank.resize(static_cast<std::size_t>(comm.size()));
  for (double PhaseTimes::*phase : phases) {
    const std::vector<double> per_rank = comm.gather_all(mine.*phase);
    for (int r = 0; r < comm.size(); ++r) {
      stats.per_rank[r].*phase = per_rank[r];
      stats.slowest.*phase = std::max(stats.slowest.*phase, per_rank[r]);
    }
  }
}

// How the output was written, for --stats: rank 0's way, every rank's extents.
void record_output_report(const io::OutputReport& report, const comm::Communicator& comm, console::RunStats& stats) {
  stats.output_parts = report.parts;
  stats.output_mapped = report.mapped;
  stats.output_threads = report.threads;
  stats.output_tmpfs = report.tmpfs_settings;
  stats.output_huge_extents = comm.sum(report.huge_extents);
  stats.output_extents = comm.sum(report.huge_extents + report.small_extents);
}

std::string setting_named(const std::vector<std::string>& settings, const std::string& name) {
  for (const std::string& setting : settings)
    if (setting.rfind(name + "=", 0) == 0) return setting;
  return "";
}

}  // namespace

console::RunStats run_product(const Options& options, const comm::Communicator& comm, ProcessStart& start,
                     KeptUntilExit* kept_until_exit) {
  kernels::CudaStart& cuda = start.cuda;
  const std::vector<std::string>& start_settings = start.settings;
  const Stopwatch total_clock;
  console::RunStats stats;
  stats.started_utc = console::utc_now_iso8601();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) stats.host = host;
  stats.output_path = options.out_path;
  stats.ranks = comm.size();
  stats.nodes = comm.nodes();
  stats.nodes_simulated = comm.simulated_nodes();
  stats.start_settings = start_settings;
  stats.settings = options.settings.given;
  // Threads and cores (driver/cores.hpp): --threads, OMP_NUM_THREADS, else the rank's share of
  // its node within the cores it is bound to; only Open MPI's unasked-for binding is widened.
  const CorePlan cores = choose_cores(options.threads, comm.node_rank(), comm.node_size(), start.environment);
  if (!cores.note.empty() && comm.is_root() && !options.quiet) std::cerr << "blockmm: note: " << cores.note << "\n";
  stats.threads = cores.threads;
  omp_set_num_threads(stats.threads);
  comm.run_phase([&] { start_thread_team(stats.threads); });
  io::OutputPolicy output_policy;  // copying threads, huge folios, parts (io/product_writer.hpp)
  comm.run_phase([&] {
    output_policy = io::output_policy(
        io::write_policy(options.settings.write_threads, options.settings.huge_output,
                         options.settings.file_io == settings::FileIo::pwrite, options.settings.tmpfs_fallocate,
                         stats.threads),
        stats.threads, options.parts);
  });
  console::ProgressConfig progress_config = console::progress_config_for_stderr(options.progress, options.settings);
  if (!comm.is_root()) progress_config.style = console::ProgressStyle::none;  // rank 0 speaks for the run
  if (comm.size() > 1) progress_config.scope = "rank 0 of " + std::to_string(comm.size());
  const std::string version = version_text();
  progress_config.header = {version.substr(0, version.find('\n')), stats.host, comm.size(), stats.threads,
                            options.command_line};
  console::Progress progress(progress_config);
  ProgressObserver observer(progress, options.settings.test_pause_numeric);

  // Headers on every rank (cheap); the records are read where the backend builds from them.
  Stopwatch read_clock;
  progress.phase("reading inputs");
  std::unique_ptr<io::InputFile> a_file, b_file;
  comm.run_phase([&] { a_file = io::open_input(options.a_path, comm); });
  comm.run_phase([&] {
    b_file = io::open_input(options.b_path, comm);
    io::check_same_shape(*a_file, *b_file);
  });
  const MatrixShape shape = a_file->header().shape();
  for (const io::InputFile* file : {a_file.get(), b_file.get()}) {
    struct stat st {};
    const std::int64_t bytes = ::stat(file->path().c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
    stats.inputs.push_back({file->path(), file->format_name(), bytes});
  }

  // CUDA's contexts start now, beside the reading, on the GPUs this rank drives.
  const std::int64_t input_bytes =
      (a_file->header().k + b_file->header().k) * record_bytes<std::uint16_t>(shape.m);
  const bool gpu_likely = start.gpu_likely;
  const std::string visibility = setting_named(start_settings, "CUDA_VISIBLE_DEVICES");
  std::vector<int> gpus;
  double driver_wait = 0;  // the CUDA driver's start (begun in main): setup, not reading
  if (gpu_likely) {
    const Stopwatch driver_clock;
    const int devices = cuda.device_count();
    driver_wait = driver_clock.seconds();
    gpus = rank_gpus(devices, comm, !visibility.empty(), options.gpus);
    backends::start_gpus(cuda, gpus, input_bytes, stats.threads,
                         kernels::estimated_rank_work(shape, a_file->header().k, b_file->header().k, comm.size()),
                         cuda_choices(options.settings.cuda));
  }

  // The temporary output exists from here on, so that an unwritable target fails before the work.
  stats.output_format = options.format == io::OutputFormat::hdf5 ? "hdf5" : "binary";
  std::unique_ptr<io::ProductWriter> writer = io::make_product_writer(options.format, options.out_path, comm, output_policy);
  const double opening = read_clock.seconds() - driver_wait;

  // Which ranks share this rank's GPU, asked only where CUDA is being started anyway (the same
  // decision on every rank: it follows the options and the headers).
  int gpu_sharers = 0;
  if (gpu_likely && comm.size() > 1) gpu_sharers = count_gpu_sharers(cuda, gpus.empty() ? -1 : gpus[0], comm);

  const multiply::Options product_options = multiply_options(options, stats.threads, comm, kept_until_exit);
  multiply::Report& product = stats;
  product = multiply::multiply(*a_file, *b_file,
                               team_factory(options, cuda, comm, stats.threads, gpus, gpu_sharers,
                                            visibility.empty() ? "" : "[" + visibility + "]", start.teams),
                               *writer, comm, product_options, observer);
  stats.mine.read += opening;
  stats.mine.setup += driver_wait;

  {
    const multiply::PhaseScope commit(stats.mine, observer, multiply::Phase::commit);
    writer->finish();
  }
  stats.output_bytes = comm.sum(writer->bytes_written());
  record_output_report(writer->report(), comm, stats);
  progress.finish(
      console::written_summary(options.out_path, stats.output_format, stats.c_blocks, stats.output_bytes, total_clock.seconds()));
  stats.mine.total = total_clock.seconds();
  gather_phase_times(stats.mine, comm, stats);
  return stats;
}

namespace {

void report_error(const Options& options, const char* what) {
  const std::string prefix = options.batch_origin.empty() ? "" : options.batch_origin + ": ";
  std::fprintf(stderr, "blockmm: error: %s%s\n", prefix.c_str(), escape_control_characters(what).c_str());
}

// The product itself: checks, the stats file (made before the work), the run, its stats.
void run_and_write_stats(const Options& options, const comm::Communicator& comm, ProcessStart& start,
                         KeptUntilExit* kept_until_exit) {
  // Never write over an input, nor the stats over the product (exit 2, nothing written). The
  // stats file is created (and its space reserved) before the work, so that it cannot fail
  // after the product has replaced the old output; every rank learns of a failure.
  comm.run_phase([&] {
    io::check_not_an_input(options.out_path, "output", {options.a_path, options.b_path});
    if (options.stats_file.empty()) return;
    io::check_not_an_input(options.stats_file, "--stats-file", {options.a_path, options.b_path});
    io::check_distinct_outputs(options.out_path, options.stats_file, "--stats-file");
  });
  // Its writer is opened now too: after the product's commit only writing into the reserved
  // space, a sync and a rename are left. The reservation covers the command line's bytes six
  // times over (a control character is written \u00XX, a byte that is not UTF-8 as two bytes).
  std::unique_ptr<io::AtomicOutput> stats_file;
  std::unique_ptr<io::FileWriter> stats_writer;
  if (!options.stats_file.empty()) {
    stats_file = std::make_unique<io::AtomicOutput>(options.stats_file, comm);
    std::int64_t argument_bytes = 0;
    for (const std::string& argument : options.command_line) argument_bytes += static_cast<std::int64_t>(argument.size());
    comm.run_phase([&] { stats_file->reserve((std::int64_t{64} << 10) + std::int64_t{1024} * comm.size() + 6 * argument_bytes); });
    comm.run_phase([&] { stats_writer = stats_file->open_writer(); });
  }
  console::RunStats stats = run_product(options, comm, start, kept_until_exit);
  const std::string version = version_text();
  stats.version = version.substr(0, version.find('\n'));  // "blockmm X.Y.Z (commit ...)"
  stats.command_line = options.command_line;
  // The stats on stdout: a write that fails (a full disk, /dev/full, a closed pipe) is an output
  // failure (exit 4) that every rank agrees on, not a success with the stats lost.
  comm.run_phase([&] {
    if (!comm.is_root()) return;
    if (options.stats == StatsMode::text) std::cout << console::stats_text(stats);
    if (options.stats == StatsMode::json) std::cout << console::stats_json(stats) << "\n";
    io::flush_standard_output(" (the product " + options.out_path + " was written)");
  });
  if (stats_file) {
    const std::string json = console::stats_json(stats) + "\n";
    // The product is in place by now: a stats file that still fails (a device written in place,
    // such as /dev/full; an I/O error) says so, as a failed write of the stats on stdout does.
    try {
      comm.run_phase([&] {
        if (comm.is_root()) {
          stats_writer->write_at(0, json.data(), static_cast<std::int64_t>(json.size()));
          stats_file->set_size(static_cast<std::int64_t>(json.size()));
        }
        stats_writer->sync_and_close();
      });
      stats_file->commit();
    } catch (const Error& e) {
      throw Error(e.code(), std::string(e.what()) + " (the product " + options.out_path + " was written)");
    }
  }
}

}  // namespace

int run_and_report(const Options& options, const comm::Communicator& comm, ProcessStart& start,
                   KeptUntilExit* kept_until_exit) {
  try {
    run_and_write_stats(options, comm, start, kept_until_exit);
    return 0;
  } catch (const Error& e) {
    // Errors are agreed on by every rank (same code, same message); rank 0 reports, and no rank
    // goes on before it has (a launcher may end the job at the first non-zero exit).
    backends::drop_teams_after_failure(start.teams, std::current_exception());
    if (comm.is_root()) report_error(options, e.what());
    try {
      comm.barrier();
    } catch (...) {
    }
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    report_error(options, "out of memory");
    comm.abort(static_cast<int>(ExitCode::resource));
  } catch (const std::system_error& e) {
    // A thread that could not be started (EAGAIN) is a resource failure like std::bad_alloc.
    const bool resource = e.code() == std::errc::resource_unavailable_try_again;
    report_error(options, ((resource ? "cannot start a thread: " : "") + std::string(e.what())).c_str());
    comm.abort(static_cast<int>(resource ? ExitCode::resource : ExitCode::other));
  } catch (const std::exception& e) {
    report_error(options, e.what());
    comm.abort(static_cast<int>(ExitCode::other));
  }
}

}  // namespace blockmm::driver
