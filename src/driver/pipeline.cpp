#include "driver/pipeline.hpp"

#include <omp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <future>
#include <iostream>
#include <memory>
#include <thread>
#include <tuple>

#include "comm/mpi_start.hpp"
#include "core/error.hpp"
#include "driver/backend_choice.hpp"
#include "driver/cores.hpp"
#include "driver/progress.hpp"
#include "driver/shared_right_operand.hpp"
#include "driver/shared_rows.hpp"
#include "driver/whole_inputs.hpp"
#include "io/input_file.hpp"
#include "io/mapped_writer.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "partition/distribute.hpp"
#include "partition/relabel.hpp"
#include "partition/work.hpp"

namespace blockmm::driver {
namespace {

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

// The smallest block (i, j), as i * 2^32 + j, that the records of all ranks hold twice, or -1.
// Collective. Each key goes to the rank the key picks, which sorts what it receives: memory in
// proportion to the records, never to n (the build's row arrays cost 8 bytes a block-row).
std::int64_t first_duplicate_block(const InputRecords& records, const comm::Communicator& comm) {
  const int ranks = comm.size();
  std::vector<std::vector<std::uint64_t>> by_rank(static_cast<std::size_t>(ranks));
  for (std::int64_t q = 0; q < records.size(); ++q) {
    const std::uint64_t key = static_cast<std::uint64_t>(record_row(records.record(q))) << 32 |
                              static_cast<std::uint32_t>(record_col(records.record(q)));
    by_rank[key % static_cast<std::uint64_t>(ranks)].push_back(key);
  }
  std::vector<std::uint64_t> send;
  std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    send.insert(send.end(), by_rank[r].begin(), by_rank[r].end());
    send_bytes[r] = static_cast<std::int64_t>(by_rank[r].size() * sizeof(std::uint64_t));
  }
  std::vector<std::int64_t> recv_bytes;
  const LargeVector<std::byte> received = comm.exchange(reinterpret_cast<const std::byte*>(send.data()), send_bytes, recv_bytes);
  std::vector<std::uint64_t> keys(received.size() / sizeof(std::uint64_t));
  if (!keys.empty()) std::memcpy(keys.data(), received.data(), keys.size() * sizeof(std::uint64_t));
  std::sort(keys.begin(), keys.end());
  std::int64_t local = INT64_MAX;
  for (std::size_t e = 1; e < keys.size() && local == INT64_MAX; ++e)
    if (keys[e] == keys[e - 1]) local = static_cast<std::int64_t>(keys[e]);
  const std::int64_t global = -comm.max(-local);
  return global == INT64_MAX ? -1 : global;
}

// Per-rank phase times, gathered for --stats (collective).
void gather_phase_times(const PhaseTimes& mine, const comm::Communicator& comm, RunStats& stats) {
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
void record_output_report(const io::OutputReport& report, const comm::Communicator& comm, RunStats& stats) {
  stats.output_parts = report.parts;
  stats.output_mapped = report.mapped;
  stats.output_threads = report.threads;
  stats.output_tmpfs = report.tmpfs_settings;
  stats.output_huge_extents = comm.sum(report.huge_extents);
  stats.output_extents = comm.sum(report.huge_extents + report.small_extents);
}

}  // namespace

RunStats run_product(const Options& options, const comm::Communicator& comm, KeptUntilExit* kept_until_exit) {
  Stopwatch total_clock;
  Stopwatch clock;
  PhaseTimes mine;
  RunStats stats;
  stats.started_utc = utc_now_iso8601();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) stats.host = host;
  stats.output_path = options.out_path;
  stats.ranks = comm.size();
  stats.nodes = comm.nodes();
  stats.nodes_simulated = comm.simulated_nodes();
  // What blockmm set in its environment before MPI and CUDA started (main).
  stats.start_settings = comm::applied_mpi_start_settings();
  for (const std::string& setting : applied_cuda_start_settings()) stats.start_settings.push_back(setting);
  // Threads and cores (driver/cores.hpp): --threads, OMP_NUM_THREADS, else the rank's share of
  // its node within the cores it is bound to; only Open MPI's unasked-for binding is widened.
  const CorePlan cores = choose_cores(options.threads, comm.node_rank(), comm.node_size());
  if (!cores.note.empty() && comm.is_root() && !options.quiet) std::cerr << "blockmm: note: " << cores.note << "\n";
  stats.threads = cores.threads;
  omp_set_num_threads(stats.threads);
  comm.run_phase([&] { start_thread_team(stats.threads); });
  io::OutputPolicy output_policy;  // copying threads, huge folios, parts (io/product_writer.hpp)
  comm.run_phase([&] { output_policy = io::output_policy(stats.threads, options.parts); });
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
  std::shared_future<void> cuda_warm_up = start_cuda_warm_up(options, comm, input_bytes, stats.threads);
  const MatrixShape shape = a_file->header().shape();
  // (Held for its destructor, which waits for a load still in flight when the run ends.)
  const std::future<void> dense_library = start_dense_library_load(
      options, input_bytes, estimated_rank_work(shape, a_file->header().k, b_file->header().k, comm.size()));
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
  std::unique_ptr<io::ProductWriter> writer = io::make_product_writer(format, options.out_path, comm, output_policy);
  mine.read = clock.lap();

  if (stats.a_records == 0 || stats.b_records == 0) {
    // An empty operand makes an empty product: nothing is built or multiplied, so that memory
    // follows the records, not n (a 12-byte file may claim n = 2^31 - 1). The other operand's
    // records are still read and checked: indices when read, duplicates here.
    const std::int32_t p = shape.block_rows();
    std::int64_t my_b_records = 0;
    comm.run_phase([&] {
      for (io::InputFile* file : {a_file.get(), b_file.get()}) {
        const InputRecords records = file->read_records(io::record_share(file->header().k, comm.rank(), comm.size()));
        if (file == b_file.get()) my_b_records = records.size();
        const std::int64_t twice = first_duplicate_block(records, comm);
        if (twice < 0) continue;
        const auto i = static_cast<std::int32_t>(twice >> 32), j = static_cast<std::int32_t>(twice & 0xFFFFFFFF);
        // Rank 0's message is the one agreed on: only it scans the file for the records' places.
        throw InputError(comm.is_root() ? partition::duplicate_message(*file)(i, j) : "duplicate block");
      }
      if (cuda_warm_up.valid()) cuda_warm_up.wait();
      stats.backend = choose_backend(options, comm, stats.threads, {})->name();
    });
    mine.build = clock.lap();
    // Each rank's panel is its share of the file's block-rows, and holds none of them: no labels
    // (compact indices, none in use), one row pointer. The HDF5 writer streams the panel's
    // entries of /indptr (the file holds n/m + 1 of them) in bounded pieces.
    const std::vector<std::int32_t> rows = partition::equal_row_ranges(p, comm.size());
    const std::vector<std::int32_t> no_labels;
    OutputLayout empty;
    empty.row_ptr.assign(1, 0);
    empty.labels = &no_labels;
    empty.file_row_begin = rows[comm.rank()];
    empty.file_row_end = rows[comm.rank() + 1];
    progress.phase("committing output");
    comm.run_phase([&] { writer->begin(shape, 0, 0, empty); });
    writer->finish();
    mine.commit = clock.lap();
    stats.device = "none (empty product)";
    stats.output_bytes = comm.sum(writer->bytes_written());
    record_output_report(writer->report(), comm, stats);
    stats.rank_work.assign(static_cast<std::size_t>(comm.size()), 0);
    stats.rank_rows = comm.gather_all(static_cast<std::int64_t>(empty.file_row_end - empty.file_row_begin));
    progress.finish();
    mine.total = total_clock.seconds();
    gather_phase_times(mine, comm, stats);
    stats.rank_bytes_exchanged = comm.gather_all(std::int64_t{0});
    stats.rank_b_records = comm.gather_all(my_b_records);
    return stats;
  }

  // A huge n against few records: the pipeline runs on compact labels of the block indices in
  // use (partition/relabel.hpp), so that no array follows n; the writers map them back.
  progress.phase("partitioning");
  partition::Relabelling relabelled;
  io::InputFile* a_input = a_file.get();
  io::InputFile* b_input = b_file.get();
  bool relabel = false;
  comm.run_phase([&] {
    relabel = partition::should_relabel(partition::relabel_mode_from_environment(), shape.block_rows(),
                                        stats.a_records, stats.b_records);
  });
  if (relabel) {
    comm.run_phase([&] { relabelled = partition::relabel(*a_file, *b_file, comm); });
    a_input = relabelled.a.get();
    b_input = relabelled.b.get();
    mine.read += clock.lap();
  }
  const MatrixShape work_shape = a_input->header().shape();  // the shape the backend computes on

  // The backend, chosen before any operand exists: it builds its own, where it computes.
  std::unique_ptr<kernels::Backend> backend;
  // Which ranks share this rank's GPU, asked only where CUDA is being started anyway (the same
  // decision on every rank: it follows the options and the headers).
  int gpu_sharers = 0;
  if (cuda_warm_up.valid()) {
    comm.run_phase([&] { cuda_warm_up.wait(); });
    if (comm.size() > 1) gpu_sharers = count_gpu_sharers(comm);
  }
  comm.run_phase([&] {
    backend = choose_backend(options, comm, stats.threads,
                             estimated_rank_work(work_shape, stats.a_records, stats.b_records, comm.size()), gpu_sharers);
  });
  stats.backend = backend->name();
  mine.setup = clock.lap();

  // Which records this rank multiplies (several ranks: balanced block-row ranges), and its
  // operands built from them. Ranks of one node whose backend builds whole inputs cheaply take
  // them whole from the files (driver/whole_inputs.hpp); otherwise partition::distribute()
  // hands each rank its rows, and ranks of one node share the rows at the ends of their panels
  // where the backend computes handed-out tiles (driver/shared_rows.hpp).
  partition::Distribution dist;
  std::unique_ptr<kernels::Operand> a, b;
  SharedNumericPlan shared;
  bool share_rows = false;
  bool share_b = false;
  std::int64_t my_b_records = 0;
  if (builds_whole_inputs(*backend, *a_input, *b_input, comm)) {
    progress.phase("building operands");
    WholeInputs whole = build_whole_inputs(*backend, *a_input, *b_input, comm);
    dist.bounds = std::move(whole.bounds);
    dist.method = partition::DistributionMethod::whole_inputs;
    a = std::move(whole.a);
    b = std::move(whole.b);
    my_b_records = b_input->header().k;
    mine.read += whole.read_upload_seconds;
    mine.build = clock.lap() - whole.read_upload_seconds;
  } else {
    // Ranks of one node that each need all of B read one copy of it
    // (driver/shared_right_operand.hpp): the node's first rank reads and builds it.
    dist = partition::distribute(*a_input, *b_input, comm,
                                 backend->computes_handed_out_tiles() ? row_sharing(comm.size(), shape.m, stats.threads)
                                                                      : partition::RowSharing{},
                                 right_operand_may_be_shared(*backend, work_shape, b_input->header().k));
    mine.read += dist.read_seconds;
    mine.exchange = dist.exchange_seconds;
    mine.build = dist.build_seconds;
    clock.lap();
    // Every rank shares rows, or none does (only backends that compute handed-out tiles can).
    share_rows = comm.sum(!dist.shared.empty() && backend->computes_handed_out_tiles() ? 0 : 1) == 0;
    share_b = dist.b_shared_on_node;
    my_b_records = dist.b ? dist.b->size() : 0;
    progress.phase("building operands");
    comm.run_phase([&] {
      a = backend->build(*dist.a, dist.a_spec);
      dist.a.reset();
      if (!share_b || comm.rank() == comm.node_leader()) b = backend->build(*dist.b, dist.b_spec);
      dist.b.reset();
      if (share_rows && dist.below) shared.below.a = backend->build(*dist.below, dist.below_spec);
      if (share_rows && dist.above) shared.above.a = backend->build(*dist.above, dist.above_spec);
      dist.below.reset();
      dist.above.reset();
    });
    if (share_b) comm.run_phase([&] { b = right_operand_shared_on_node(std::move(b), comm); });
    mine.build += clock.lap();
  }
  stats.distribution = partition::to_string(dist.method);

  std::int64_t my_products = 0;
  comm.run_phase([&] { my_products = backend->block_products(*a, *b); });
  stats.block_products = comm.sum(my_products);
  stats.a_blocks = comm.sum(a->blocks());
  stats.b_blocks = comm.max(b->blocks());
  stats.rank_work = comm.gather_all(my_products);
  // The file's block-rows of this rank's panel (with labels: the rows between them too).
  std::int32_t file_row_begin = dist.bounds[comm.rank()], file_row_end = dist.bounds[comm.rank() + 1];
  if (relabel)
    std::tie(file_row_begin, file_row_end) =
        partition::file_rows(*relabelled.labels, shape.block_rows(), file_row_begin, file_row_end);
  stats.rank_rows = comm.gather_all(static_cast<std::int64_t>(file_row_end - file_row_begin));
  stats.imbalance = partition::imbalance(stats.rank_work);

  // Symbolic phase, and each rank's place in the output.
  progress.phase("symbolic");
  std::unique_ptr<kernels::ProductPattern> pattern;
  comm.run_phase([&] {
    pattern = backend->symbolic(*a, *b);
    for (NeighbourRegion* region : {&shared.below, &shared.above})
      if (region->a) region->pattern = backend->symbolic(*region->a, *b);
  });
  mine.symbolic = clock.lap();
  const std::int64_t first_tile = comm.exclusive_prefix_sum(pattern->tiles());
  stats.c_blocks = comm.sum(pattern->tiles());

  // Numeric phase, streaming its chunks into the file.
  OutputLayout labelled;  // the pattern's layout with the labels, only where there are labels
  if (relabel) {
    labelled = pattern->layout();
    labelled.labels = relabelled.labels.get();
    labelled.file_row_begin = file_row_begin;
    labelled.file_row_end = file_row_end;
  }
  comm.run_phase([&] { writer->begin(shape, stats.c_blocks, first_tile, relabel ? labelled : pattern->layout()); });
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
  std::int64_t tiles_for_neighbours = 0;
  if (share_rows) {
    shared.m = shape.m;
    shared.regions = &dist.shared;
    shared.row_begin = dist.bounds[comm.rank()];
    shared.give_first = give_shared_rows_first();
    numeric_options.progress = nullptr;  // the tiles_computed counter moves the display
    const SharedNumericResult result =
        shared_numeric(*backend, *a, *b, *pattern, shared, *writer, numeric_options, comm);
    report = result.report;
    tiles_for_neighbours = result.tiles_for_neighbours;
  } else {
    comm.run_phase([&] { report = backend->numeric(*a, *b, *pattern, *writer, numeric_options); });
  }
  mine.numeric = clock.lap();
  mine.write = report.sink_seconds;
  mine.numeric_compute = report.compute_seconds;
  // "GPU 0" is the rank's own view; where blockmm narrowed what CUDA sees, it names the GPU too.
  const std::string visibility = applied_cuda_visibility();
  const std::string my_device =
      report.device.rfind("GPU ", 0) == 0 && !visibility.empty() ? report.device + " [" + visibility + "]" : report.device;
  stats.device = my_device;
  stats.backend_steps = backend->step_seconds();
  for (int r = 0; r < comm.size(); ++r) {  // each rank's device, for --stats=json's "gpus"
    std::string device = comm.rank() == r ? my_device : std::string();
    comm.broadcast(device, r);
    stats.rank_devices.push_back(device);
  }
  stats.numeric_chunks = comm.max(report.chunks);

  progress.phase("committing output");
  writer->finish();
  mine.commit = clock.lap();
  stats.output_bytes = comm.sum(writer->bytes_written());
  record_output_report(writer->report(), comm, stats);
  progress.finish();
  mine.total = total_clock.seconds();

  gather_phase_times(mine, comm, stats);
  stats.rank_bytes_exchanged = comm.gather_all(dist.exchanged.bytes_sent + dist.exchanged.bytes_received);
  stats.shared_rows = share_rows;
  stats.b_shared_on_node = share_b;
  stats.rank_b_records = comm.gather_all(my_b_records);
  stats.rank_tiles_for_neighbours = comm.gather_all(tiles_for_neighbours);
  stats.record_bytes_within_node = comm.sum(dist.exchanged.record_bytes_within_node);
  stats.record_bytes_between_nodes = comm.sum(dist.exchanged.record_bytes_between_nodes);
  stats.index_bytes_within_node = comm.sum(dist.exchanged.index_bytes_within_node);
  stats.index_bytes_between_nodes = comm.sum(dist.exchanged.index_bytes_between_nodes);
  if (kept_until_exit != nullptr) {
    // Device arrays go with the operands, then the backend that made them (as on return).
    kept_until_exit->push_back(std::move(pattern));
    kept_until_exit->push_back(std::move(a));
    kept_until_exit->push_back(std::move(b));
    kept_until_exit->push_back(std::make_shared<SharedNumericPlan>(std::move(shared)));
    kept_until_exit->push_back(std::move(backend));
  }
  return stats;
}

}  // namespace blockmm::driver
