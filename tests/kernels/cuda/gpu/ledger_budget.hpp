// Budgets for the GPU tests that mean to leave a numeric phase a given room: what the cuda
// backend's ledger (kernels/cuda/device_ledger.hpp) holds for the operands of a x b and their
// pattern, its reserve for CUDA's own, and the pages the path's buffers round up to, on top.
#pragma once

#include <cstdint>

#include "core/block_matrix.hpp"
#include "kernels/cuda/device_ledger.hpp"

namespace blockmm::testing {

// A budget under which a numeric phase on a path with `path_buffers` large buffers
// (kernels::cuda::kSparsePathBuffers or kDensePathBuffers) plans with `room` bytes, beside a x b's
// operands and a pattern of `tiles` tiles.
inline std::int64_t budget_leaving(const InputRecords& a, const InputRecords& b, std::int64_t tiles, std::int64_t room,
                                   int path_buffers) {
  using namespace kernels::cuda;
  const std::int32_t m = a.shape.m, p = a.shape.block_rows();
  const std::int64_t operands = operand_device_bytes(a.size(), m, p, p, false) + operand_device_bytes(b.size(), m, p, p, true);
  const std::int64_t pattern = allocation_footprint(8 * (std::int64_t{p} + 1)) + allocation_footprint(4 * tiles);
  return operands + pattern + kUncountedReserve + page_slack(path_buffers) + room;
}

}  // namespace blockmm::testing
