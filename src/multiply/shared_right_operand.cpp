#include "multiply/shared_right_operand.hpp"

#include <sys/statvfs.h>

#include <string>

#include "core/error.hpp"
#include "operands/packed_rows.hpp"

namespace blockmm::multiply {

bool right_operand_may_be_shared(const kernels::Backend& backend, bool allowed, MatrixShape shape,
                                 std::int64_t b_records_in_file) {
  if (!allowed || !backend.traits().right_operand_shareable) return false;
  // The copy is a file in /dev/shm, often small in containers, where it would fail to allocate:
  // its bound (every record kept, in whole 2 MiB pages) must fit the free space with an eighth
  // to spare, or each rank keeps its own B.
  const std::int64_t bound = comm::NodeSharedBytes::space_for(operands::packed_bytes_bound(shape, b_records_in_file));
  struct statvfs fs {};
  return ::statvfs("/dev/shm", &fs) == 0 &&
         static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) >= 1.125 * static_cast<double>(bound);
}

std::unique_ptr<kernels::Operand> right_operand_shared_on_node(kernels::Backend& backend,
                                                               std::unique_ptr<kernels::Operand> b,
                                                               const comm::Communicator& comm) {
  const bool first = comm.rank() == comm.node_leader();
  if (first != (b != nullptr))
    throw Error(ExitCode::other, "internal error: the node's first rank, and only it, builds the shared B");
  const std::int64_t bytes = first ? backend.packed_bytes(*b) : 0;
  std::shared_ptr<comm::NodeSharedBytes> shared = comm.node_shared_bytes(bytes);
  if (first) {
    backend.pack(*b, shared->data());
    b.reset();  // the rank's own copy: the node reads the shared one
  }
  shared->publish();
  return backend.unpack(shared->data(), shared->size(), std::shared_ptr<const void>(shared, shared->data()));
}

}  // namespace blockmm::multiply
