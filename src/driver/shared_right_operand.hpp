// The right operand that the ranks of one node read from one copy (issue 21). Two copies of B
// in a node's caches cost two single-thread ranks 7-9 % against one two-thread process on C8
// (bench/NOTES.md item 22); with one copy in memory the node's ranks share (comm::NodeSharedBytes,
// on huge pages: item 24), the node's first rank builds B and every rank's kernels read it there.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"

namespace blockmm::driver {

// Whether the ranks of this node share their right operand: the backend computes on host
// operands, the node has several ranks (as the distribution sees nodes), each of them holds all
// of B's records (`b_records` of the file's `b_records_in_file`: then their B is the same), the
// copy fits /dev/shm (where the shared copy lives), and BLOCKMM_SHARE_B is not "0". Collective;
// the same answer on every rank of a node.
bool share_right_operand_on_node(const kernels::Backend& backend, MatrixShape shape, std::int64_t b_records,
                                 std::int64_t b_records_in_file, const comm::Communicator& comm);

// Collective over the node: its first rank passes the host operand it built, the others null;
// every rank gets an operand over one copy in memory the node's ranks share (the first rank's
// own copy is freed).
std::unique_ptr<kernels::Operand> right_operand_shared_on_node(std::unique_ptr<kernels::Operand> b,
                                                               const comm::Communicator& comm);

}  // namespace blockmm::driver
