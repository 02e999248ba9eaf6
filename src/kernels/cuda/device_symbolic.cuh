// The exact symbolic phase and the block-product counts on the device operands
// (device_build.cuh), and the dense path's column-tile splits of the pattern. Only counts and
// offsets come back to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/device_operands.cuh"

namespace blockmm::kernels::cuda {

std::int64_t device_block_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream);

// Block products of each block-row of `a` (a.rows_held() entries), counted on the device.
std::vector<std::int64_t> device_row_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream);

// Exact symbolic phase on the device, rows taken in batches of at most `batch_bytes` of scratch
// (one row alone may exceed it).
std::unique_ptr<DevicePattern> device_symbolic(const DeviceOperand& a, const DeviceOperand& b, std::int64_t batch_bytes,
                                               cudaStream_t stream);

// Per row of the pattern, where each column tile of `tile_cols` block-columns starts:
// rows x (col_tiles + 1) absolute tile indices (offsets only), for the dense path's work units.
std::vector<std::int64_t> column_tile_splits(const DevicePattern& pattern, std::int32_t col_tiles,
                                             std::int32_t tile_cols, cudaStream_t stream);

}  // namespace blockmm::kernels::cuda
