// Operands and product patterns that live on the GPU: what the cuda backend builds from records
// and what its kernels read. The host keeps only counts and offsets (row and column pointers),
// which the chunk planning needs; blocks, values, masks and the tiles' columns stay on the device
// (a left operand the device cannot hold: in pinned host memory the kernels read in place). Their
// arrays are charged to their GPU's ledger (device_ledger.hpp) while they live.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/large_buffer.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/device_memory.cuh"

namespace blockmm::kernels::cuda {

class DeviceOperand final : public Operand {
 public:
  std::int64_t blocks() const override { return blocks_; }

  int device = -1;  // the GPU holding it (or reading it, in host memory)
  MatrixShape shape;
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  std::int64_t blocks_ = 0;
  bool built_on_device = false;  // false: built on the host and uploaded (the fallback)
  bool in_host_memory = false;   // its arrays in pinned host memory, read over the host link

  // CSR over rows [row_begin, row_end): pointers relative to the first row, columns absolute.
  LargeVector<std::int64_t> row_ptr;  // host copy (rows + 1)
  DeviceArray<std::int32_t> d_row_ptr;
  DeviceArray<std::int32_t> d_col;
  DeviceArray<std::uint16_t> d_values;  // CSR order, m * m each
  DeviceArray<std::uint64_t> d_masks;   // mask_words(m) per block: non-zero columns (A) or rows (B)
  // CSC over every block-column (right operands only): rows absolute, entries name CSR blocks.
  LargeVector<std::int64_t> col_ptr;  // host copy (p + 1)
  DeviceArray<std::int32_t> d_col_ptr;
  DeviceArray<std::int32_t> d_csc_row;
  DeviceArray<std::int32_t> d_csc_block;

  std::int32_t rows_held() const { return row_end - row_begin; }
  // The device memory its arrays take (their footprints; 0 in host memory).
  std::int64_t device_bytes() const {
    return d_row_ptr.device_bytes() + d_col.device_bytes() + d_values.device_bytes() + d_masks.device_bytes() +
           d_col_ptr.device_bytes() + d_csc_row.device_bytes() + d_csc_block.device_bytes();
  }
};

class DevicePattern final : public ProductPattern {
 public:
  explicit DevicePattern(OutputLayout layout) { layout_ = std::move(layout); }
  DeviceArray<std::int64_t> d_row_ptr;  // rows + 1
  DeviceArray<std::int32_t> d_col;      // tiles: the block-column of each, ascending within a row
  std::int64_t block_products = 0;      // of the panel (the symbolic phase counts them per row anyway)
};

}  // namespace blockmm::kernels::cuda
