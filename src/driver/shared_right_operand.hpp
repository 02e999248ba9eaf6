// The right operand that the ranks of one node read from one copy (issue 21). Two copies of B
// in a node's caches cost two single-thread ranks 7-9 % against one two-thread process on C8
// (bench/NOTES.md item 22); with one copy in memory the node's ranks share (comm::NodeSharedBytes,
// on huge pages: item 24), the node's first rank alone reads and builds B (partition::distribute
// decides it before any rank reads B) and every rank's kernels read it there.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"

namespace blockmm::driver {

// Whether this rank may share its right operand with the ranks of its node: the backend computes
// on host operands, the copy of B's `b_records_in_file` records would fit /dev/shm (where the
// shared copy lives), and BLOCKMM_SHARE_B is not "0". Not collective: partition::distribute
// shares B where every rank of a node (several of them) may and needs all of B.
bool right_operand_may_be_shared(const kernels::Backend& backend, MatrixShape shape, std::int64_t b_records_in_file);

// Collective over the node: its first rank passes the host operand it built, the others null;
// every rank gets an operand over one copy in memory the node's ranks share (the first rank's
// own copy is freed).
std::unique_ptr<kernels::Operand> right_operand_shared_on_node(std::unique_ptr<kernels::Operand> b,
                                                               const comm::Communicator& comm);

}  // namespace blockmm::driver
