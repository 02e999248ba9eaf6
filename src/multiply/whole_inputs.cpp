#include "multiply/whole_inputs.hpp"

#include <string>

#include "core/error.hpp"
#include "partition/distribute.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {
namespace {

double read_upload_seconds(const kernels::Backend& backend) { return backend.steps().build_read_upload.seconds; }

// The bounds as bytes, for comparing them with rank 0's.
std::string bounds_bytes(const std::vector<std::int32_t>& bounds) {
  return std::string(reinterpret_cast<const char*>(bounds.data()), bounds.size() * sizeof(std::int32_t));
}

}  // namespace

bool builds_whole_inputs(const kernels::Backend& backend, io::InputFile& a_file, io::InputFile& b_file,
                         const comm::Communicator& comm) {
  if (comm.size() == 1 || comm.nodes() != 1) return false;
  bool mine = false;
  comm.run_phase([&] {
    const io::FileRecordSource a(a_file, {0, a_file.header().k});
    const io::FileRecordSource b(b_file, {0, b_file.header().k});
    mine = a_file.readable_by_every_rank() && b_file.readable_by_every_rank() && backend.builds_whole_inputs(a, b);
  });
  return comm.sum(mine ? 0 : 1) == 0;
}

WholeInputs build_whole_inputs(kernels::Backend& backend, io::InputFile& a_file, io::InputFile& b_file,
                               const comm::Communicator& comm) {
  const std::int32_t p = a_file.header().shape().block_rows();
  WholeInputs whole;
  comm.run_phase([&] {
    const double read_before = read_upload_seconds(backend);
    io::FileRecordSource b_records(b_file, {0, b_file.header().k});
    whole.b = backend.build(b_records, {0, p, OperandRole::right, partition::duplicate_message(b_file)});
    io::FileRecordSource a_records(a_file, {0, a_file.header().k});
    std::unique_ptr<kernels::Operand> a = backend.build(a_records, {0, p, OperandRole::left, partition::duplicate_message(a_file)});
    whole.read_upload_seconds = read_upload_seconds(backend) - read_before;
    whole.bounds = partition::balanced_ranges(backend.row_products(*a, *whole.b), comm.size());
    whole.a = backend.slice_rows(*a, whole.bounds[comm.rank()], whole.bounds[comm.rank() + 1]);
  });
  const std::string mine = bounds_bytes(whole.bounds);
  std::string root = mine;
  comm.broadcast(root, 0);
  if (comm.sum(root == mine ? 0 : 1) != 0)
    throw Error(ExitCode::other, "internal error: the ranks balanced the rows of the same inputs differently");
  return whole;
}

}  // namespace blockmm::multiply
