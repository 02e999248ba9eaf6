// The right operand that the ranks of one node read from one copy: two copies of B in a node's
// caches cost the ranks more than one process with their threads, whose one copy they share. The
// copy lives in anonymous memory the node's ranks share (comm/node_shared_memory.hpp), packed by the backend
// (operands/packed_rows.hpp); the node's first rank alone reads and builds B
// (partition::distribute decides it before any rank reads B) and every rank's kernels read it there.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"

namespace blockmm::multiply {

// Collective over the node: its first rank passes the host operand it built, the others null;
// every rank gets the one copy in `memory` (the first rank's own copy is freed), over which each
// of its backends makes an operand of its own (unpack_shared).
std::shared_ptr<comm::NodeSharedBytes> right_operand_shared_on_node(kernels::Backend& backend,
                                                                    std::unique_ptr<kernels::Operand> b,
                                                                    comm::NodeSharedMemory& memory,
                                                                    const comm::Communicator& comm);
std::unique_ptr<kernels::Operand> unpack_shared(kernels::Backend& backend, const std::shared_ptr<comm::NodeSharedBytes>& shared);

}  // namespace blockmm::multiply
