#include "multiply/multiply.hpp"

#include <algorithm>
#include <climits>
#include <memory>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "multiply/empty_product.hpp"
#include "multiply/shared_right_operand.hpp"
#include "multiply/shared_rows.hpp"
#include "multiply/team.hpp"
#include "multiply/whole_inputs.hpp"
#include "partition/distribute.hpp"
#include "partition/relabel.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {
namespace {

// The inputs as the kernels see them: the files, or relabelled copies of this rank's shares
// (partition/relabel.hpp), whose labels the writer maps back until the output is committed.
struct WorkInputs {
  io::InputFile* a = nullptr;
  io::InputFile* b = nullptr;
  partition::Relabelling relabelled;
  bool relabel = false;
};

WorkInputs prepare_inputs(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm,
                          const Options& options, Report& report, Observer& observer) {
  WorkInputs in;
  in.a = &a_file;
  in.b = &b_file;
  comm.run_phase([&] {
    in.relabel = partition::should_relabel(options.relabel, a_file.header().shape().block_rows(), report.a_records,
                                           report.b_records);
  });
  if (in.relabel) {
    const PhaseScope read(report.mine, observer, Phase::read);
    comm.run_phase([&] { in.relabelled = partition::relabel(a_file, b_file, comm); });
    in.a = in.relabelled.a.get();
    in.b = in.relabelled.b.get();
  }
  return in;
}

// A rank whose one backend computes its panel: the operands it builds (or whose rows its node's
// ranks share with it), the neighbours' regions it may compute, and its distribution's counts.
struct Panel {
  partition::Distribution dist;
  std::unique_ptr<kernels::Operand> a, b;
  SharedNumericPlan shared;
  bool share_rows = false;
  std::int64_t b_records = 0;
  std::int64_t input_records = 0;  // records this rank took from the files or its share of them
};

Panel build_panel(kernels::Backend& backend, const WorkInputs& in, const comm::Communicator& comm, const Options& options,
                  Report& report, Observer& observer) {
  Panel panel;
  const MatrixShape shape = in.a->header().shape();
  if (builds_whole_inputs(backend, *in.a, *in.b, comm)) {
    PhaseScope build(report.mine, observer, Phase::build);
    WholeInputs whole = build_whole_inputs(backend, *in.a, *in.b, comm);
    panel.dist.bounds = std::move(whole.bounds);
    panel.dist.method = partition::DistributionMethod::whole_inputs;
    panel.a = std::move(whole.a);
    panel.b = std::move(whole.b);
    panel.b_records = in.b->header().k;
    panel.input_records = in.a->header().k + in.b->header().k;
    build.stop();
    report.mine.build -= whole.read_upload_seconds;  // the reading's share of the build
    report.mine.read += whole.read_upload_seconds;
    return panel;
  }
  // Ranks of one node that each need all of B read one copy of it (shared_right_operand.hpp):
  // the node's first rank reads and builds it.
  // The node's ranks all hold that memory before the decision, or none of them shares.
  observer.phase_started(Phase::read);
  const bool handed_out = backend.traits().computes_handed_out_tiles;
  std::unique_ptr<comm::NodeSharedMemory> b_memory;
  comm.run_phase([&] { b_memory = comm.node_shared_memory(right_operand_may_be_shared(backend, options.share_b)); });
  panel.dist = partition::distribute(
      *in.a, *in.b, comm,
      handed_out ? row_sharing(options.share_rows, comm.size(), shape.m, options.threads) : partition::RowSharing{},
      b_memory != nullptr);
  partition::Distribution& dist = panel.dist;
  report.mine.read += dist.read_seconds;
  report.mine.exchange += dist.exchange_seconds;
  report.mine.build += dist.build_seconds;
  // Every rank shares rows, or none does (only backends that compute handed-out tiles can).
  panel.share_rows = comm.sum(!dist.shared.empty() && handed_out ? 0 : 1) == 0;
  const bool share_b = dist.b_shared_on_node;
  panel.b_records = dist.b ? dist.b->size() : 0;
  panel.input_records = panel.b_records + (dist.a ? dist.a->size() : 0) + (dist.below ? dist.below->size() : 0) +
                        (dist.above ? dist.above->size() : 0);
  const PhaseScope build(report.mine, observer, Phase::build);
  comm.run_phase([&] {
    panel.a = backend.build(*dist.a, dist.a_spec);
    dist.a.reset();
    if (!share_b || comm.rank() == comm.node_leader()) panel.b = backend.build(*dist.b, dist.b_spec);
    dist.b.reset();
    if (panel.share_rows && dist.below) panel.shared.below.a = backend.build(*dist.below, dist.below_spec);
    if (panel.share_rows && dist.above) panel.shared.above.a = backend.build(*dist.above, dist.above_spec);
    dist.below.reset();
    dist.above.reset();
  });
  if (share_b) comm.run_phase([&] { panel.b = right_operand_shared_on_node(backend, std::move(panel.b), *b_memory, comm); });
  return panel;
}

// The numeric phase's options: chunks, and the progress display's counters.
kernels::NumericOptions numeric_options(const Options& options, Observer& observer) {
  kernels::NumericOptions numeric;
  numeric.chunk_bytes = options.chunk_bytes;
  numeric.tiles_computed = observer.tile_counter();
  numeric.progress = [&observer](std::int64_t done) { observer.tiles_done(done); };
  return numeric;
}

// The rest of a one-backend rank's product once its operands exist: counts, the symbolic phase,
// its place in the output, and the numeric phase into the writer.
void multiply_panel(kernels::Backend& backend, Panel& panel, const WorkInputs& in, io::ProductWriter& writer,
                    const comm::Communicator& comm, const Options& options, Observer& observer, Report& report) {
  const MatrixShape shape = in.a->header().shape();
  const MatrixShape file_shape{report.n, report.m};
  std::int64_t my_products = 0;
  comm.run_phase([&] { my_products = backend.block_products(*panel.a, *panel.b); });
  report.block_products = comm.sum(my_products);
  report.a_blocks = comm.sum(panel.a->blocks());
  report.b_blocks = comm.max(panel.b->blocks());
  report.rank_work = comm.gather_all(my_products);
  // The file's block-rows of this rank's panel (with labels: the rows between them too).
  std::int32_t file_row_begin = panel.dist.bounds[comm.rank()], file_row_end = panel.dist.bounds[comm.rank() + 1];
  if (in.relabel)
    std::tie(file_row_begin, file_row_end) =
        partition::file_rows(*in.relabelled.labels, file_shape.block_rows(), file_row_begin, file_row_end);
  report.rank_rows = comm.gather_all(static_cast<std::int64_t>(file_row_end - file_row_begin));
  report.imbalance = partition::imbalance(report.rank_work);

  std::unique_ptr<kernels::ProductPattern> pattern;
  {
    const PhaseScope symbolic(report.mine, observer, Phase::symbolic);
    comm.run_phase([&] {
      pattern = backend.symbolic(*panel.a, *panel.b);
      for (NeighbourRegion* region : {&panel.shared.below, &panel.shared.above})
        if (region->a) region->pattern = backend.symbolic(*region->a, *panel.b);
    });
  }
  const std::int64_t first_tile = comm.exclusive_prefix_sum(pattern->tiles());
  report.c_blocks = comm.sum(pattern->tiles());

  OutputLayout layout = pattern->layout();
  if (in.relabel) {
    layout.labels = in.relabelled.labels.get();
    layout.file_row_begin = file_row_begin;
    layout.file_row_end = file_row_end;
  }
  comm.run_phase([&] { writer.begin(file_shape, report.c_blocks, first_tile, layout); });

  const PhaseScope numeric(report.mine, observer, Phase::numeric);
  observer.counting(pattern->tiles(), pattern->tiles() > 0 ? static_cast<double>(my_products) * shape.m * shape.m *
                                                                 shape.m / static_cast<double>(pattern->tiles())
                                                           : 0.0);
  kernels::NumericOptions numeric_options_ = numeric_options(options, observer);
  kernels::NumericReport numeric_report;
  std::int64_t tiles_for_neighbours = 0;
  if (panel.share_rows) {
    panel.shared.m = shape.m;
    panel.shared.regions = &panel.dist.shared;
    panel.shared.row_begin = panel.dist.bounds[comm.rank()];
    panel.shared.give_first = options.share_rows == RowSharingMode::give_first;
    numeric_options_.progress = nullptr;  // the tiles_computed counter moves the display
    const SharedNumericResult result =
        shared_numeric(backend, *panel.a, *panel.b, *pattern, panel.shared, writer, numeric_options_, comm);
    numeric_report = result.report;
    tiles_for_neighbours = result.tiles_for_neighbours;
  } else {
    comm.run_phase([&] { numeric_report = backend.numeric(*panel.a, *panel.b, *pattern, writer, numeric_options_); });
  }
  report.mine.write = numeric_report.sink_seconds;
  report.mine.numeric_compute = numeric_report.compute_seconds;
  report.device = numeric_report.device;
  report.numeric_chunks = comm.max(numeric_report.chunks);
  report.backend_steps = backend.step_seconds();
  report.shared_rows = panel.share_rows;
  report.b_shared_on_node = panel.dist.b_shared_on_node;
  report.rank_tiles_for_neighbours = comm.gather_all(tiles_for_neighbours);
  report.workers.push_back({numeric_report.device, my_products, file_row_end - file_row_begin, 0, 0, panel.b->blocks(),
                            0, 0, pattern->tiles(), 0});
  report.workers.back().device_memory = backend.counters().device_memory;
  if (options.kept_until_exit != nullptr) {
    // Device arrays go with the operands, then the backend that made them (as on return).
    options.kept_until_exit->push_back(std::move(pattern));
    options.kept_until_exit->push_back(std::move(panel.a));
    options.kept_until_exit->push_back(std::move(panel.b));
    options.kept_until_exit->push_back(std::make_shared<SharedNumericPlan>(std::move(panel.shared)));
  }
}

}  // namespace

kernels::WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks, int ranks) {
  kernels::WorkEstimate estimate;
  estimate.n = shape.n;
  estimate.m = shape.m;
  const std::int32_t p = std::max(1, shape.block_rows());
  const int share = std::max(1, ranks);
  estimate.rows = static_cast<std::int32_t>((std::int64_t{p} + share - 1) / share);
  const double products = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / p / share;
  estimate.block_products = products >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(products);
  estimate.input_blocks = (a_blocks + b_blocks) / share;
  return estimate;
}

std::int64_t estimated_macs(const kernels::WorkEstimate& estimate) {
  const double m = estimate.m;
  const double macs = static_cast<double>(estimate.block_products) * m * m * m;
  return macs >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(macs);
}

Report multiply(io::InputFile& a_file, io::InputFile& b_file, const TeamFactory& make_team, io::ProductWriter& writer,
                const comm::Communicator& comm, const Options& options, Observer& observer) {
  Report report;
  const MatrixShape shape = a_file.header().shape();
  report.n = shape.n;
  report.m = shape.m;
  report.a_records = a_file.header().k;
  report.b_records = b_file.header().k;
  if (report.a_records == 0 || report.b_records == 0) {
    multiply_empty(a_file, b_file, make_team, writer, comm, observer, report);
    return report;
  }

  // A huge n against few records: the product runs on compact labels of the block indices in
  // use (partition/relabel.hpp), so that no array follows n; the writers map them back.
  WorkInputs in = prepare_inputs(a_file, b_file, comm, options, report, observer);
  const MatrixShape work_shape = in.a->header().shape();

  // The backends, made before any operand exists: they build their own, where they compute.
  Team team;
  {
    const PhaseScope setup(report.mine, observer, Phase::setup);
    comm.run_phase([&] {
      team = make_team(estimated_rank_work(work_shape, report.a_records, report.b_records, comm.size()));
      if (team.empty()) throw Error(ExitCode::other, "internal error: no backend to multiply with");
    });
  }
  report.backend = team[0]->name();
  observer.backend_chosen(report.backend);

  // A team, panels asked for, or a GPU that cannot hold both inputs (then B is split and
  // streamed): team.hpp's path, on every rank alike (its collectives differ).
  bool with_team = team.size() > 1 || options.b_panels > 0;
  comm.run_phase([&] {
    if (with_team || !team[0]->traits().device) return;
    const std::int32_t p = work_shape.block_rows();
    const io::FileRecordSource a_all(*in.a, {0, in.a->header().k}), b_all(*in.b, {0, in.b->header().k});
    const std::int64_t need = team[0]->operand_bytes(a_all, {0, p, OperandRole::left, {}}) +
                              team[0]->operand_bytes(b_all, {0, p, OperandRole::right, {}}) +
                              team[0]->numeric_bytes_at_least(work_shape.m);
    const std::int64_t room = team[0]->memory_room();
    with_team = room > 0 && need > room;
  });
  with_team = comm.sum(with_team ? 1 : 0) > 0;
  if (with_team) {
    multiply_with_team(team, in.a, in.b, in.relabel ? in.relabelled.labels : nullptr, writer, comm, options, observer,
                       report);
  } else {
    Panel panel = build_panel(*team[0], in, comm, options, report, observer);
    report.distribution = partition::to_string(panel.dist.method);
    report.record_bytes_within_node = comm.sum(panel.dist.exchanged.record_bytes_within_node);
    report.record_bytes_between_nodes = comm.sum(panel.dist.exchanged.record_bytes_between_nodes);
    report.index_bytes_within_node = comm.sum(panel.dist.exchanged.index_bytes_within_node);
    report.index_bytes_between_nodes = comm.sum(panel.dist.exchanged.index_bytes_between_nodes);
    report.rank_bytes_exchanged =
        comm.gather_all(panel.dist.exchanged.bytes_sent + panel.dist.exchanged.bytes_received);
    report.rank_b_records = comm.gather_all(panel.b_records);
    report.input_bytes_read = comm.sum(panel.input_records * record_bytes<std::uint16_t>(work_shape.m));
    multiply_panel(*team[0], panel, in, writer, comm, options, observer, report);
  }
  report.labels = in.relabelled.labels;
  for (int r = 0; r < comm.size(); ++r) {  // each rank's device, for --stats=json's "gpus"
    std::string device = comm.rank() == r ? report.device : std::string();
    comm.broadcast(device, r);
    report.rank_devices.push_back(device);
  }
  if (options.kept_until_exit != nullptr)
    for (const std::shared_ptr<kernels::Backend>& backend : team) options.kept_until_exit->push_back(backend);
  return report;
}

}  // namespace blockmm::multiply
