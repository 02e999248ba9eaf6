#include "multiply/shared_right_operand.hpp"

#include <string>

#include "core/error.hpp"

namespace blockmm::multiply {

std::shared_ptr<comm::NodeSharedBytes> right_operand_shared_on_node(kernels::Backend& backend,
                                                                    std::unique_ptr<kernels::Operand> b,
                                                                    comm::NodeSharedMemory& memory,
                                                                    const comm::Communicator& comm) {
  const bool first = comm.rank() == comm.node_leader();
  if (first != (b != nullptr))
    throw Error(ExitCode::other, "internal error: the node's first rank, and only it, builds the shared B");
  const std::int64_t bytes = first ? backend.packed_bytes(*b) : 0;
  std::shared_ptr<comm::NodeSharedBytes> shared = memory.map(bytes);
  if (first) {
    backend.pack(*b, shared->data());
    b.reset();  // the rank's own copy: the node reads the shared one
  }
  shared->publish();
  return shared;
}

std::unique_ptr<kernels::Operand> unpack_shared(kernels::Backend& backend, const std::shared_ptr<comm::NodeSharedBytes>& shared) {
  return backend.unpack(shared->data(), shared->size(), std::shared_ptr<const void>(shared, shared->data()));
}

}  // namespace blockmm::multiply
