#include "multiply/multiply.hpp"

#include <algorithm>
#include <memory>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "multiply/empty_product.hpp"
#include "multiply/pipeline.hpp"
#include "multiply/plan.hpp"
#include "multiply/whole_inputs.hpp"
#include "partition/relabel.hpp"

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

// What the rank's records take in host memory where its backend builds them (from the headers:
// its share of A's block-rows, all of B), for the placement plan. Collective.
PlacementPlan plan_rank_placement(const Team& team, io::InputFile& a_file, io::InputFile& b_file,
                                  const comm::Communicator& comm, const Options& options) {
  PlacementFacts facts;
  facts.backends = static_cast<int>(team.size());
  facts.traits = team[0]->traits();
  facts.ranks = comm.size();
  facts.node_ranks = comm.node_size();
  facts.one_node = comm.size() == 1 || (comm.nodes() == 1 && a_file.readable_by_every_rank() && b_file.readable_by_every_rank());
  facts.whole_inputs = builds_whole_inputs(*team[0], a_file, b_file, comm);
  facts.options = options;
  PlacementPlan plan;
  comm.run_phase([&] {
    const MatrixShape shape = a_file.header().shape();
    const std::int32_t p = shape.block_rows(), ranks = comm.size();
    const std::int64_t a_share = (a_file.header().k + ranks - 1) / ranks, b_all = b_file.header().k;
    if (facts.traits.device) {  // a GPU reads one rank's files through staging; ranks hold their records
      facts.a_host_bytes = ranks > 1 ? a_share * record_bytes<std::uint16_t>(shape.m) : 0;
      facts.b_host_bytes = ranks > 1 ? b_all * record_bytes<std::uint16_t>(shape.m) : 0;
    } else {  // a copy of B on each backend
      facts.a_host_bytes =
          team[0]->operand_bytes(io::FileRecordSource(a_file, {0, a_share}), {0, (p + ranks - 1) / ranks, OperandRole::left, {}});
      facts.b_host_bytes = facts.backends * team[0]->operand_bytes(io::FileRecordSource(b_file, {0, b_all}), {0, p, OperandRole::right, {}});
    }
    plan = plan_placement(facts);
  });
  return plan;
}

}  // namespace

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
      team = make_team(kernels::estimated_rank_work(work_shape, report.a_records, report.b_records, comm.size()));
      if (team.empty()) throw Error(ExitCode::other, "internal error: no backend to multiply with");
    });
  }
  report.backend = team[0]->name();
  observer.backend_chosen(report.backend);

  const PlacementPlan plan = plan_rank_placement(team, *in.a, *in.b, comm, options);
  report.plan_refused = plan.refused;
  run_rank(team, *in.a, *in.b, in.relabel ? in.relabelled.labels : nullptr, plan, writer, comm, options, observer, report);
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
