#include "multiply/pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <string>
#include <tuple>
#include <utility>

#include "core/each_on_a_thread.hpp"
#include "core/error.hpp"
#include "core/placing_sink.hpp"
#include "core/stopwatch.hpp"
#include "multiply/shared_right_operand.hpp"
#include "multiply/shared_rows.hpp"
#include "multiply/whole_inputs.hpp"
#include "partition/column_panels.hpp"
#include "partition/distribute.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {
namespace {

// One backend's rows of the rank's A by B, or by one panel of B's block-columns.
struct Job {
  std::int32_t row_begin = 0;
  std::int32_t col_begin = 0, col_end = 0;
  std::unique_ptr<RecordSource> b_records;  // a panel's, built where it is computed (null: `b` is built once)
  std::unique_ptr<kernels::Operand> b;      // null while a streamed panel is out
  std::unique_ptr<kernels::ProductPattern> pattern;
  std::vector<std::int64_t> row_start;      // per row of the job: the place of its first tile in the rank's rows
};

struct Worker {
  std::unique_ptr<kernels::Operand> a;
  std::vector<Job> jobs;  // in column order
  std::int64_t block_products = 0;
  kernels::NumericReport numeric;
  WorkerReport report;
};

// The rank's state from one phase to the next.
struct Rank {
  Rank(const Team& t, const comm::Communicator& c, const Options& o, Observer& obs, Report& r)
      : team(t), comm(c), options(o), observer(obs), report(r) {}
  const Team& team;
  const comm::Communicator& comm;
  const Options& options;
  Observer& observer;
  Report& report;
  partition::Distribution dist;
  io::InputFile* b_input = nullptr;
  std::int64_t b_room = 0;               // host bytes B may take (0: no bound)
  std::shared_ptr<RecordSource> b_file;  // B's whole file, where B is left in it (dist.b: the rank's rows of it)
  std::unique_ptr<comm::NodeSharedMemory> b_memory;
  std::shared_ptr<comm::NodeSharedBytes> shared_b;
  std::unique_ptr<kernels::Operand> a, b;  // rows: as built, before they are spread over the team
  std::vector<Worker> workers;
  SharedNumericPlan shared;  // rows shared with the neighbours (a team of one)
  bool share_rows = false, streamed = false;
  std::int64_t max_panel_blocks = 0, input_records = 0, tiles_for_neighbours = 0, products = 0, tiles = 0;
  std::size_t backends() const { return team.size(); }
  kernels::Backend& backend(std::size_t w) const { return *team[w]; }
};

// The rank's records from partition::distribute; or its operands, where every rank of a node
// builds whole inputs.
void place(Rank& rank, io::InputFile& a_file, io::InputFile& b_file, const PlacementPlan& plan) {
  const comm::Communicator& comm = rank.comm;
  partition::Distribution& dist = rank.dist;
  PhaseTimes& mine = rank.report.mine;
  rank.workers.resize(rank.backends());
  rank.b_input = &b_file;
  rank.b_room = plan.b_room;
  if (plan.whole_inputs) {
    PhaseScope build(mine, rank.observer, Phase::build);
    WholeInputs whole = build_whole_inputs(rank.backend(0), a_file, b_file, comm);
    build.stop();
    mine.build -= whole.read_upload_seconds;  // the reading's share of the build
    mine.read += whole.read_upload_seconds;
    dist.bounds = std::move(whole.bounds);
    dist.method = partition::DistributionMethod::whole_inputs;
    dist.b_records = b_file.header().k;
    dist.b_spec.row_end = a_file.header().shape().block_rows();
    rank.input_records = a_file.header().k + b_file.header().k;
    rank.a = std::move(whole.a);
    rank.b = std::move(whole.b);
    return;
  }
  rank.observer.phase_started(Phase::read);
  comm.run_phase([&] { rank.b_memory = comm.node_shared_memory(plan.share_b); });
  const partition::RowSharing sharing =
      plan.share_rows ? row_sharing(rank.options.share_rows, comm.size(), a_file.header().m, rank.options.threads)
                      : partition::RowSharing{};
  dist = partition::distribute(a_file, b_file, comm, sharing, rank.b_memory != nullptr, plan.b_from_file);
  mine.read += dist.read_seconds;
  mine.exchange += dist.exchange_seconds;
  mine.build += dist.build_seconds;
  rank.share_rows = comm.sum(dist.shared.empty() ? 1 : 0) == 0;  // every rank shares rows, or none does
  if (dist.b_in_file) {
    rank.b_file = std::move(dist.b);
    dist.b = partition::rows_in_file(rank.b_file, dist.b_rows, dist.b_records, b_file.path());
  }
  dist.b_records = dist.b->size();
  rank.input_records = dist.b_records + dist.a->size() + (dist.below ? dist.below->size() : 0) +
                       (dist.above ? dist.above->size() : 0);
}

// The rank's layout over its team (plan.hpp), from what its records take on its backends.
LayoutPlan plan_rank_layout(Rank& rank, const PlacementPlan& placement) {
  LayoutPlan plan;
  if (placement.whole_inputs) return plan;
  const partition::Distribution& dist = rank.dist;
  kernels::Backend& first = rank.backend(0);
  rank.comm.run_phase([&] {
    LayoutFacts facts;
    facts.backends = static_cast<int>(rank.backends());
    facts.panels_asked = rank.options.b_panels;
    facts.shares = rank.share_rows || dist.b_shared_on_node;
    facts.a_bytes = first.operand_bytes(*dist.a, dist.a_spec);
    facts.b_bytes = first.operand_bytes(*dist.b, dist.b_spec);
    facts.room = first.memory_room();
    facts.numeric_bytes = first.numeric_bytes_at_least(dist.a->shape().m);
    const std::int32_t rows = dist.a_spec.row_end - dist.a_spec.row_begin, p = dist.b_spec.row_end;
    facts.pattern_bytes = first.pattern_bytes(kernels::estimated_tiles(dist.a->size(), dist.b->size(), rows, p), rows);
    // A host backend holds B (a copy each, unless the node shares one); a GPU reads it through staging.
    if (!first.traits().device)
      facts.b_host_bytes = facts.b_bytes * (dist.b_shared_on_node ? 1 : facts.backends);
    facts.b_host_room = placement.b_room;
    facts.host_memory = rank.options.host_memory;
    facts.host_memory_asked = rank.options.host_memory_asked;
    plan = plan_layout(facts);
    if (plan.max_panel_bytes > 0)  // the bytes a panel may take, as blocks (B's take about the same each)
      rank.max_panel_blocks = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(static_cast<double>(plan.max_panel_bytes) * static_cast<double>(dist.b->size()) /
                                       static_cast<double>(std::max<std::int64_t>(1, facts.b_bytes))));
  });
  return plan;
}

// Rows: the rank's A and B built from the records, at once on two backends where there are
// several (B on the first, A on the second: each read once, over its own host link); B only by
// the node's first rank where the node shares it; the neighbours' regions where rows are shared.
void build_rows(Rank& rank) {
  partition::Distribution& dist = rank.dist;
  const bool builds_b = !dist.b_shared_on_node || rank.comm.rank() == rank.comm.node_leader();
  kernels::Backend& first = rank.backend(0);
  if (!rank.a) {  // (whole inputs are built)
    if (rank.backends() == 1) {
      rank.a = first.build(*dist.a, dist.a_spec);
      dist.a.reset();
      if (builds_b) rank.b = first.build(*dist.b, dist.b_spec);
    } else {
      std::future<void> a_built = std::async(std::launch::async, [&] { rank.a = rank.backend(1).build(*dist.a, dist.a_spec); });
      if (builds_b) rank.b = first.build(*dist.b, dist.b_spec);  // B's error first, as one build reports
      a_built.get();
    }
  }
  dist.a.reset();
  dist.b.reset();
  if (rank.share_rows && dist.below) rank.shared.below.a = first.build(*dist.below, dist.below_spec);
  if (rank.share_rows && dist.above) rank.shared.above.a = first.build(*dist.above, dist.above_spec);
  dist.below.reset();
  dist.above.reset();
}

// Rows over the team: the second backend balances the rank's rows by their block products and
// every backend copies its rows of A and all of B from the two that built them (between GPUs a
// peer copy), or reads the node's copy of B.
void spread_rows(Rank& rank) {
  const std::size_t backends = rank.backends();
  const std::int32_t row_begin = rank.dist.bounds[rank.comm.rank()], p = rank.dist.b_spec.row_end;
  const auto b_for = [&](std::size_t w) {
    return rank.shared_b ? unpack_shared(rank.backend(w), rank.shared_b) : rank.backend(w).copy_operand(*rank.b);
  };
  const auto give = [&](std::size_t w, std::unique_ptr<kernels::Operand> a, std::unique_ptr<kernels::Operand> b,
                        std::int32_t rows_begin, std::int32_t rows_end) {
    rank.workers[w].a = std::move(a);
    rank.workers[w].jobs.push_back(Job{rows_begin, 0, p, nullptr, std::move(b), nullptr, {}});
    rank.workers[w].report.rows = rows_end - rows_begin;
  };
  if (backends == 1) {
    std::unique_ptr<kernels::Operand> b = rank.shared_b ? b_for(0) : std::move(rank.b);
    return give(0, std::move(rank.a), std::move(b), row_begin, rank.dist.bounds[rank.comm.rank() + 1]);
  }
  kernels::Backend& second = rank.backend(1);
  std::unique_ptr<kernels::Operand> b_second = b_for(1);
  std::vector<std::int32_t> bounds = partition::balanced_ranges(second.row_products(*rank.a, *b_second), static_cast<int>(backends));
  for (std::int32_t& bound : bounds) bound += row_begin;
  for (std::size_t w = 0; w < backends; ++w) {
    std::unique_ptr<kernels::Operand> rows = second.slice_rows(*rank.a, bounds[w], bounds[w + 1]);
    std::unique_ptr<kernels::Operand> b = w == 1 ? std::move(b_second) : w > 1 || rank.shared_b ? b_for(w) : nullptr;
    give(w, w == 1 ? std::move(rows) : rank.backend(w).copy_operand(*rows), std::move(b), bounds[w], bounds[w + 1]);
  }
  if (!rank.shared_b) rank.workers[0].jobs[0].b = std::move(rank.b);
  rank.a.reset();
  rank.b.reset();
  rank.report.team_layout = "rows split over " + std::to_string(backends) + " " + rank.backend(0).name() +
                            " backends; B built on the first and A on the second at once, each copied to the others";
}

// Columns: B cut into panels of near-equal work, none past the plan's bytes, read from its
// records in memory or from its file; every backend holds the rank's A (built on the first,
// copied to the others) and builds the panels it is given (panel q on backend q mod W).
void build_columns(Rank& rank, const LayoutPlan& plan) {
  partition::Distribution& dist = rank.dist;
  const std::size_t backends = rank.backends();
  const std::vector<std::int64_t> a_columns = partition::blocks_per_column(*dist.a);
  partition::ColumnCounts counts;
  std::vector<std::int32_t> cut;
  std::vector<std::unique_ptr<RecordSource>> panels;
  // One rank's B is its file: read into memory once where the host has room for it (a GPU's
  // panels), else scanned at each panel's build.
  if (!rank.b_file && dist.method == partition::DistributionMethod::one_rank && rank.b_room > 0 &&
      dist.b->size() * dist.b->stride() > rank.b_room)
    rank.b_file = std::make_shared<io::FileRecordSource>(*rank.b_input, io::RecordRange{0, dist.b->size()});
  if (rank.b_file) {
    counts = partition::column_counts(*rank.b_file, dist.b_rows, a_columns);
    cut = partition::column_cut(counts, plan.panels, rank.max_panel_blocks);
    panels = partition::panels_in_file(rank.b_file, dist.b_rows, cut, counts, rank.b_input->path());
  } else {
    MemoryRecordSource held(dist.b->take());
    counts = partition::column_counts(held, {}, a_columns);
    cut = partition::column_cut(counts, plan.panels, rank.max_panel_blocks);
    panels = partition::panels_in_memory(std::make_shared<const InputRecords>(held.take()), cut);
  }
  dist.b.reset();
  OperandSpec a_spec = dist.a_spec;
  a_spec.in_host_memory = plan.a_in_host_memory;
  std::unique_ptr<kernels::Operand> a = rank.backend(0).build(*dist.a, a_spec);
  dist.a.reset();
  for (std::size_t w = 1; w < backends; ++w) rank.workers[w].a = rank.backend(w).copy_operand(*a);
  rank.workers[0].a = std::move(a);
  for (std::size_t q = 0; q < panels.size(); ++q)
    rank.workers[q % backends].jobs.push_back(
        Job{dist.bounds[rank.comm.rank()], cut[q], cut[q + 1], std::move(panels[q]), nullptr, nullptr, {}});
  rank.streamed = panels.size() > backends;
  rank.report.team_layout = "B split by block-columns into " + std::to_string(panels.size()) + " panels over " +
                            std::to_string(backends) + " " + rank.backend(0).name() + " backends" +
                            (rank.streamed ? ", streamed" : "") + (rank.b_file ? ", read from its file" : "") +
                            (plan.a_in_host_memory ? "; A read from host memory" : "");
}

void build(Rank& rank, const LayoutPlan& plan) {
  const PhaseScope build(rank.report.mine, rank.observer, Phase::build);
  const comm::Communicator& comm = rank.comm;
  comm.run_phase([&] { plan.split_columns ? build_columns(rank, plan) : build_rows(rank); });
  comm.run_phase([&] {
    if (rank.dist.b_shared_on_node && !plan.split_columns)
      rank.shared_b = right_operand_shared_on_node(rank.backend(0), std::move(rank.b), *rank.b_memory, comm);
  });
  comm.run_phase([&] {
    if (!plan.split_columns) spread_rows(rank);
  });
}

// Each job's pattern, on each backend's thread; a streamed panel is freed again, but for the
// last, with which the numeric phase starts.
void symbolic(Rank& rank) {
  const PhaseScope symbolic(rank.report.mine, rank.observer, Phase::symbolic);
  rank.comm.run_phase([&] {
    run_each_on_a_thread(rank.backends(), [&](std::size_t w) {
      kernels::Backend& backend = rank.backend(w);
      Worker& worker = rank.workers[w];
      for (std::size_t k = 0; k < worker.jobs.size(); ++k) {
        Job& job = worker.jobs[k];
        if (!job.b) job.b = backend.build(*job.b_records, rank.dist.b_spec);
        worker.block_products += backend.block_products(*worker.a, *job.b);
        job.pattern = backend.symbolic(*worker.a, *job.b);
        worker.report.b_blocks = std::max(worker.report.b_blocks, job.b->blocks());
        if (rank.streamed && k + 1 < worker.jobs.size()) job.b.reset();
      }
      if (w == 0 && worker.jobs.size() == 1)
        for (NeighbourRegion* region : {&rank.shared.below, &rank.shared.above})
          if (region->a) region->pattern = backend.symbolic(*region->a, *worker.jobs[0].b);
    });
  });
}

// The rank's output rows: row r's tiles are its jobs' tiles of row r in column order; each job
// learns where its tiles of each row start. Then the rank's counts, and the writer begun.
void begin_output(Rank& rank, const std::shared_ptr<const std::vector<std::int32_t>>& labels, io::ProductWriter& writer) {
  const comm::Communicator& comm = rank.comm;
  Report& report = rank.report;
  const std::int32_t row_begin = rank.dist.bounds[comm.rank()], row_end = rank.dist.bounds[comm.rank() + 1];
  OutputLayout layout;
  layout.row_begin = row_begin;
  layout.row_end = row_end;
  layout.row_ptr.assign(static_cast<std::size_t>(row_end - row_begin) + 1, 0);
  std::vector<Job*> jobs;
  for (Worker& worker : rank.workers)
    for (Job& job : worker.jobs) jobs.push_back(&job);
  std::sort(jobs.begin(), jobs.end(),
            [](const Job* x, const Job* y) { return std::tie(x->row_begin, x->col_begin) < std::tie(y->row_begin, y->col_begin); });
  for (const Job* job : jobs) {
    const std::vector<std::int64_t>& own = job->pattern->layout().row_ptr;
    for (std::size_t i = 0; i + 1 < own.size(); ++i) layout.row_ptr[job->row_begin - row_begin + i + 1] += own[i + 1] - own[i];
  }
  for (std::size_t r = 1; r < layout.row_ptr.size(); ++r) layout.row_ptr[r] += layout.row_ptr[r - 1];
  std::vector<std::int64_t> filled(layout.row_ptr.begin(), layout.row_ptr.end() - 1);
  for (Job* job : jobs) {
    const std::vector<std::int64_t>& own = job->pattern->layout().row_ptr;
    for (std::size_t i = 0; i + 1 < own.size(); ++i) {
      std::int64_t& at = filled[job->row_begin - row_begin + i];
      job->row_start.push_back(at);
      at += own[i + 1] - own[i];
    }
  }
  std::int64_t products = 0, a_blocks = 0, b_blocks = 0;
  for (const Worker& worker : rank.workers) {
    products += worker.block_products;
    const bool rows = worker.jobs.size() == 1 && !worker.jobs[0].b_records;  // A split by rows, or whole on each
    a_blocks = rows ? a_blocks + worker.a->blocks() : worker.a->blocks();
    b_blocks = std::max(b_blocks, worker.report.b_blocks);
  }
  rank.products = products;
  rank.tiles = layout.tiles();
  report.block_products = comm.sum(products);
  report.rank_work = comm.gather_all(products);
  report.imbalance = partition::imbalance(report.rank_work);
  report.a_blocks = comm.sum(a_blocks);
  report.b_blocks = comm.max(b_blocks);
  layout.file_row_begin = row_begin;
  layout.file_row_end = row_end;
  if (labels) {
    layout.labels = labels.get();
    std::tie(layout.file_row_begin, layout.file_row_end) = partition::file_rows(*labels, report.n / report.m, row_begin, row_end);
  }
  report.rank_rows = comm.gather_all(static_cast<std::int64_t>(layout.file_row_end - layout.file_row_begin));
  const std::int64_t first_tile = comm.exclusive_prefix_sum(layout.tiles());
  report.c_blocks = comm.sum(layout.tiles());
  comm.run_phase([&] { writer.begin({report.n, report.m}, report.c_blocks, first_tile, layout); });
}

// Each backend's jobs on its thread (a streamed backend's last panel first: it is still built),
// their tiles placed in the rank's rows; or a team of one sharing rows with its neighbours.
void numeric(Rank& rank, io::ProductWriter& writer) {
  const PhaseScope numeric(rank.report.mine, rank.observer, Phase::numeric);
  const Options& options = rank.options;
  Observer& observer = rank.observer;
  const double m = rank.report.m;
  observer.counting(rank.tiles, rank.tiles > 0 ? static_cast<double>(rank.products) * m * m * m / static_cast<double>(rank.tiles) : 0.0);
  if (rank.share_rows) {
    Worker& worker = rank.workers[0];
    const Job& job = worker.jobs.at(0);
    rank.shared.m = rank.report.m;
    rank.shared.regions = &rank.dist.shared;
    rank.shared.row_begin = rank.dist.bounds[rank.comm.rank()];
    rank.shared.give_first = options.share_rows == RowSharingMode::give_first;
    kernels::NumericOptions shared_options;  // the tiles_computed counter moves the display
    shared_options.chunk_bytes = options.chunk_bytes;
    shared_options.tiles_computed = observer.tile_counter();
    const SharedNumericResult result =
        shared_numeric(rank.backend(0), *worker.a, *job.b, *job.pattern, rank.shared, writer, shared_options, rank.comm);
    worker.numeric = result.report;
    rank.tiles_for_neighbours = result.tiles_for_neighbours;
    return;
  }
  SerialSink serial(writer);
  std::atomic<std::int64_t> all_done{0};
  rank.comm.run_phase([&] {
    run_each_on_a_thread(rank.backends(), [&](std::size_t w) {
      Worker& worker = rank.workers[w];
      kernels::Backend& backend = rank.backend(w);
      kernels::NumericOptions numeric_options;
      numeric_options.chunk_bytes = options.chunk_bytes;
      numeric_options.tiles_computed = observer.tile_counter();
      std::int64_t reported = 0;  // of this job's tiles, those already added to all_done
      numeric_options.progress = [&](std::int64_t done) {
        observer.tiles_done(all_done += done - reported);
        reported = done;
      };
      const Stopwatch clock;
      for (std::size_t k = worker.jobs.size(); k-- > 0;) {
        Job& job = worker.jobs[k];
        if (!job.b) job.b = backend.build(*job.b_records, rank.dist.b_spec);
        reported = 0;
        PlacingSink sink(serial, record_bytes<std::uint32_t>(rank.report.m), job.pattern->layout().row_ptr, job.row_start);
        worker.numeric.add(backend.numeric(*worker.a, *job.b, *job.pattern, sink, numeric_options));
        if (rank.streamed) job.b.reset();
      }
      worker.report.numeric_seconds = clock.seconds();
    });
  });
}

// The rank's report: its slowest backend's kernels and every write, each backend's own report.
void finish_report(Rank& rank) {
  const comm::Communicator& comm = rank.comm;
  Report& report = rank.report;
  const partition::Distribution& dist = rank.dist;
  kernels::NumericReport total;
  report.device.clear();
  for (std::size_t w = 0; w < rank.backends(); ++w) {
    Worker& worker = rank.workers[w];
    total.compute_seconds = std::max(total.compute_seconds, worker.numeric.compute_seconds);
    total.sink_seconds += worker.numeric.sink_seconds;
    total.chunks += worker.numeric.chunks;
    WorkerReport& out = worker.report;
    const kernels::Backend& backend = rank.backend(w);
    out.device = worker.numeric.device.empty() ? backend.name() : worker.numeric.device;
    report.device += (w == 0 ? "" : "; ") + out.device;
    const BackendSteps steps = backend.steps();
    out.setup_seconds = steps.setup_context.seconds + steps.setup_wait_for_context.seconds;
    keep_longest(report.backend_steps, steps);
    const kernels::BackendCounters counters = backend.counters();
    out.bytes_built = counters.bytes_built;
    out.bytes_from_peers = counters.bytes_from_peers;
    out.device_memory = counters.device_memory;
    out.block_products = worker.block_products;
    for (const Job& job : worker.jobs) {
      out.tiles += job.pattern->tiles();
      if (job.b_records) out.b_columns += job.col_end - job.col_begin;
    }
    if (!worker.jobs.empty() && worker.jobs[0].b_records) out.b_panels = static_cast<std::int32_t>(worker.jobs.size());
    report.workers.push_back(out);
  }
  report.mine.write = total.sink_seconds;
  report.mine.numeric_compute = total.compute_seconds;
  report.numeric_chunks = comm.max(total.chunks);
  report.shared_rows = rank.share_rows;
  report.b_shared_on_node = dist.b_shared_on_node;
  report.rank_tiles_for_neighbours = comm.gather_all(rank.tiles_for_neighbours);
  report.distribution = partition::to_string(dist.method);
  report.record_bytes_within_node = comm.sum(dist.exchanged.record_bytes_within_node);
  report.record_bytes_between_nodes = comm.sum(dist.exchanged.record_bytes_between_nodes);
  report.index_bytes_within_node = comm.sum(dist.exchanged.index_bytes_within_node);
  report.index_bytes_between_nodes = comm.sum(dist.exchanged.index_bytes_between_nodes);
  report.rank_bytes_exchanged = comm.gather_all(dist.exchanged.bytes_sent + dist.exchanged.bytes_received);
  report.rank_b_records = comm.gather_all(dist.b_records);
  report.input_bytes_read = comm.sum(rank.input_records * record_bytes<std::uint16_t>(report.m));
}

// Where the process ends at once: what the rank holds goes with the process (device arrays
// before the backends that made them, as on return).
void keep_until_exit(Rank& rank) {
  std::vector<std::shared_ptr<void>>* kept = rank.options.kept_until_exit;
  if (kept == nullptr) return;
  for (Worker& worker : rank.workers) {
    for (Job& job : worker.jobs) {
      kept->push_back(std::move(job.pattern));
      kept->push_back(std::move(job.b));
    }
    kept->push_back(std::move(worker.a));
  }
  kept->push_back(std::make_shared<SharedNumericPlan>(std::move(rank.shared)));
}

}  // namespace

void run_rank(const Team& team, io::InputFile& a_file, io::InputFile& b_file,
              const std::shared_ptr<const std::vector<std::int32_t>>& labels, const PlacementPlan& plan,
              io::ProductWriter& writer, const comm::Communicator& comm, const Options& options, Observer& observer,
              Report& report) {
  Rank rank(team, comm, options, observer, report);
  place(rank, a_file, b_file, plan);
  const LayoutPlan layout = plan_rank_layout(rank, plan);
  build(rank, layout);
  symbolic(rank);
  begin_output(rank, labels, writer);
  numeric(rank, writer);
  finish_report(rank);
  keep_until_exit(rank);
}

}  // namespace blockmm::multiply
