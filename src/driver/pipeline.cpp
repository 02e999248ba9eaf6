#include "driver/pipeline.hpp"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <memory>
#include <thread>

#include "core/error.hpp"
#include "driver/backend_choice.hpp"
#include "driver/progress.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "partition/distribute.hpp"
#include "partition/work.hpp"

namespace blockmm::driver {
namespace {

// Defaults: OMP_NUM_THREADS if set, else the node's cores shared among its ranks.
int choose_threads(const Options& options, const comm::Communicator& comm) {
  if (options.threads > 0) return options.threads;
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return omp_get_max_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, comm.node_size()));
}

}  // namespace

RunStats run_product(const Options& options, const comm::Communicator& comm) {
  Stopwatch total_clock;
  Stopwatch clock;
  PhaseTimes mine;
  RunStats stats;
  stats.started_utc = utc_now_iso8601();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) stats.host = host;
  stats.output_path = options.out_path;
  stats.ranks = comm.size();
  stats.threads = choose_threads(options, comm);
  omp_set_num_threads(stats.threads);
  ProgressConfig progress_config = progress_config_for_stderr(options.quiet ? "none" : options.progress,
                                                              options.progress_interval);
  if (!comm.is_root()) progress_config.style = ProgressStyle::none;  // rank 0 speaks for the run
  if (comm.size() > 1) progress_config.scope = "rank 0 of " + std::to_string(comm.size());
  Progress progress(progress_config);

  // Headers on every rank (cheap); the records are read where the backend builds from them.
  progress.phase("reading inputs");
  std::unique_ptr<io::InputFile> a_file, b_file;
  comm.run_phase([&] { a_file = io::open_input(options.a_path, comm); });
  comm.run_phase([&] {
    b_file = io::open_input(options.b_path, comm);
    io::check_same_shape(*a_file, *b_file);
  });
  const std::int64_t input_bytes =
      (a_file->header().k + b_file->header().k) * record_bytes<std::uint16_t>(a_file->header().m);
  std::shared_future<void> cuda_warm_up = start_cuda_warm_up(options, comm, input_bytes);
  const MatrixShape shape = a_file->header().shape();
  stats.n = shape.n;
  stats.m = shape.m;
  for (const io::InputFile* file : {a_file.get(), b_file.get()}) {
    struct stat st {};
    const std::int64_t bytes = ::stat(file->path().c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
    stats.inputs.push_back({file->path(), file->format_name(), bytes});
  }
  stats.a_records = a_file->header().k;
  stats.b_records = b_file->header().k;

  // The temporary output exists from here on, so that an unwritable target fails before the work.
  const io::OutputFormat format = io::choose_output_format(options.out_path, options.format);
  stats.output_format = format == io::OutputFormat::hdf5 ? "hdf5" : "binary";
  std::unique_ptr<io::ProductWriter> writer = io::make_product_writer(format, options.out_path, comm);
  mine.read = clock.lap();

  // Which records this rank multiplies (several ranks: balanced block-row ranges, exchanged).
  progress.phase("partitioning");
  partition::Distribution dist = partition::distribute(*a_file, *b_file, comm);
  mine.read += dist.read_seconds;
  mine.exchange = dist.exchange_seconds;
  mine.build = dist.build_seconds;
  clock.lap();

  // The backend, chosen before any operand exists: it builds its own, where it computes.
  std::unique_ptr<kernels::Backend> backend;
  comm.run_phase([&] {
    if (cuda_warm_up.valid()) cuda_warm_up.wait();
    const std::int64_t macs = options.backend == "auto"
                                  ? estimated_rank_macs(shape, stats.a_records, stats.b_records, comm.size())
                                  : 0;
    backend = choose_backend(options, comm, stats.threads, macs);
  });
  stats.backend = backend->name();
  mine.setup = clock.lap();

  progress.phase("building operands");
  std::unique_ptr<kernels::Operand> a, b;
  comm.run_phase([&] {
    a = backend->build(*dist.a, dist.a_spec);
    dist.a.reset();
    b = backend->build(*dist.b, dist.b_spec);
    dist.b.reset();
  });
  mine.build += clock.lap();

  std::int64_t my_products = 0;
  comm.run_phase([&] { my_products = backend->block_products(*a, *b); });
  stats.block_products = comm.sum(my_products);
  stats.a_blocks = comm.sum(a->blocks());
  stats.b_blocks = comm.max(b->blocks());
  stats.rank_work = comm.gather_all(my_products);
  stats.rank_rows = comm.gather_all(
      static_cast<std::int64_t>(dist.bounds[comm.rank() + 1] - dist.bounds[comm.rank()]));
  stats.imbalance = partition::imbalance(stats.rank_work);

  // Symbolic phase, and each rank's place in the output.
  progress.phase("symbolic");
  std::unique_ptr<kernels::ProductPattern> pattern;
  comm.run_phase([&] { pattern = backend->symbolic(*a, *b); });
  mine.symbolic = clock.lap();
  const std::int64_t first_tile = comm.exclusive_prefix_sum(pattern->tiles());
  stats.c_blocks = comm.sum(pattern->tiles());

  // Numeric phase, streaming its chunks into the file.
  comm.run_phase([&] { writer->begin(shape, stats.c_blocks, first_tile, pattern->layout()); });
  kernels::NumericOptions numeric_options;
  numeric_options.chunk_bytes = options.chunk_bytes;
  numeric_options.device_memory_budget = options.mem_budget;
  const double macs_per_tile = pattern->tiles() > 0 ? static_cast<double>(my_products) * shape.m * shape.m * shape.m /
                                                          static_cast<double>(pattern->tiles())
                                                    : 0.0;
  // Backends that can bump the counter from their loops make the display move inside a chunk;
  // every backend also reports each finished piece it hands to the sink.
  progress.counted_phase("multiplying", pattern->tiles(), macs_per_tile);
  numeric_options.tiles_computed = &progress.counter();
  numeric_options.progress = [&progress](std::int64_t done) { progress.at_least(done); };
  kernels::NumericReport report;
  comm.run_phase([&] { report = backend->numeric(*a, *b, *pattern, *writer, numeric_options); });
  mine.numeric = clock.lap();
  mine.write = report.sink_seconds;
  mine.numeric_compute = report.compute_seconds;
  stats.device = report.device;
  stats.backend_steps = backend->step_seconds();
  for (int r = 0; r < comm.size(); ++r) {  // each rank's device, for --stats=json's "gpus"
    std::string device = comm.rank() == r ? report.device : std::string();
    comm.broadcast(device, r);
    stats.rank_devices.push_back(device);
  }
  stats.numeric_chunks = comm.max(report.chunks);

  progress.phase("committing output");
  writer->finish();
  mine.commit = clock.lap();
  stats.output_bytes = comm.sum(writer->bytes_written());
  progress.finish();
  mine.total = total_clock.seconds();

  // Per-rank figures, gathered for --stats.
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
  stats.rank_bytes_exchanged = comm.gather_all(dist.exchanged.bytes_sent + dist.exchanged.bytes_received);
  return stats;
}

}  // namespace blockmm::driver
