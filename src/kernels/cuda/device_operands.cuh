// Operands and product patterns that live on the GPU: what the cuda backend builds from records
// and what its kernels read. The host keeps only counts and offsets (row and column pointers),
// which the chunk planning needs; blocks, values, masks and the tiles' columns stay on the device.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/large_buffer.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/device_memory.cuh"

namespace blockmm::kernels::cuda {

// The device bytes a backend's operands and patterns hold now: each adds its own when the
// backend charges it and takes them off again when it goes, whenever that is.
class DeviceLedger {
 public:
  DeviceLedger() = default;
  DeviceLedger(const DeviceLedger&) = delete;
  DeviceLedger& operator=(const DeviceLedger&) = delete;
  ~DeviceLedger() {
    if (held_) *held_ -= bytes_;
  }
  void charge(const std::shared_ptr<std::atomic<std::int64_t>>& held, std::int64_t bytes) {
    held_ = held;
    bytes_ = bytes;
    *held_ += bytes_;
  }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> held_;
  std::int64_t bytes_ = 0;
};

class DeviceOperand final : public Operand {
 public:
  std::int64_t blocks() const override { return blocks_; }

  int device = -1;  // the GPU holding it
  DeviceLedger ledger;
  MatrixShape shape;
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  std::int64_t blocks_ = 0;
  bool built_on_device = false;  // false: built on the host and uploaded (the fallback)

  // CSR over rows [row_begin, row_end): pointers relative to the first row, columns absolute.
  HugePageVector<std::int64_t> row_ptr;  // host copy (rows + 1)
  DeviceArray<std::int32_t> d_row_ptr;
  DeviceArray<std::int32_t> d_col;
  DeviceArray<std::uint16_t> d_values;  // CSR order, m * m each
  DeviceArray<std::uint64_t> d_masks;   // mask_words(m) per block: non-zero columns (A) or rows (B)
  // CSC over every block-column (right operands only): rows absolute, entries name CSR blocks.
  HugePageVector<std::int64_t> col_ptr;  // host copy (p + 1)
  DeviceArray<std::int32_t> d_col_ptr;
  DeviceArray<std::int32_t> d_csc_row;
  DeviceArray<std::int32_t> d_csc_block;

  std::int32_t rows_held() const { return row_end - row_begin; }
  std::int64_t device_bytes() const {
    return static_cast<std::int64_t>(d_row_ptr.bytes() + d_col.bytes() + d_values.bytes() + d_masks.bytes() +
                                     d_col_ptr.bytes() + d_csc_row.bytes() + d_csc_block.bytes());
  }
};

class DevicePattern final : public ProductPattern {
 public:
  explicit DevicePattern(OutputLayout layout) { layout_ = std::move(layout); }
  DeviceArray<std::int64_t> d_row_ptr;  // rows + 1
  DeviceArray<std::int32_t> d_col;      // tiles: the block-column of each, ascending within a row
  std::int64_t block_products = 0;      // of the panel (the symbolic phase counts them per row anyway)
  DeviceLedger ledger;
  std::int64_t device_bytes() const { return static_cast<std::int64_t>(d_row_ptr.bytes() + d_col.bytes()); }
};

}  // namespace blockmm::kernels::cuda
