// The cuda backend's operands, built where they are used: records are read by many threads into
// pinned staging buffers and uploaded while the read goes on, then sorted, checked and
// compressed on the device (CUB radix sorts, scans, selects). The exact symbolic phase and the
// block-product count run there too. Only counts and offsets come back to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/record_source.hpp"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/device_operands.cuh"

namespace blockmm::kernels::cuda {

// Host memory on transparent huge pages, populated and registered with CUDA (pinned). Pinning
// through cudaMallocHost costs about 0.4 ms a MiB (4 KiB pages); registering populated 2 MiB
// pages is several times cheaper (bench/NOTES.md item 17). Falls back to a PinnedBuffer
// (cudaMallocHost) where registering fails.
class RegisteredBuffer {
 public:
  explicit RegisteredBuffer(std::size_t bytes);
  ~RegisteredBuffer();
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  std::byte* get() const { return registered_ != nullptr ? registered_ : fallback_.get(); }

 private:
  std::byte* registered_ = nullptr;  // ours, registered; else the fallback holds the memory
  PinnedBuffer fallback_;
};

// Pinned buffers that records pass through on their way to the device, one per reading thread,
// kept by the backend for both operands (pinning memory is slow; doing it once is enough).
class StagingBuffers {
 public:
  // Small slots: 16 readers pin 64 MiB in all.
  static constexpr std::int64_t kSlotBytes = std::int64_t{4} << 20;
  // Grows to `slots` buffers (never shrinks), the new ones pinned together.
  void reserve(int slots) {
    const int have = static_cast<int>(slots_.size());
    if (slots <= have) return;
    regions_.push_back(std::make_unique<RegisteredBuffer>(static_cast<std::size_t>((slots - have) * kSlotBytes)));
    for (int s = 0; s < slots - have; ++s) slots_.push_back(regions_.back()->get() + s * kSlotBytes);
  }
  std::byte* slot(int s) const { return slots_[static_cast<std::size_t>(s)]; }

 private:
  std::vector<std::unique_ptr<RegisteredBuffer>> regions_;
  std::vector<std::byte*> slots_;
};

struct BuildContext {
  int device = 0;
  int threads = 1;                // reading threads
  StagingBuffers* staging = nullptr;
  // Where the build's time went, added to: reading + uploading, and the device work after it.
  double* read_upload_seconds = nullptr;
  double* device_seconds = nullptr;
};

// Device bytes the device build of `records` needs at its peak (records, sort buffers, result).
std::int64_t device_build_bytes(const RecordSource& records, const OperandSpec& spec);

// Throws InputError (spec.duplicate_message) on a duplicate block.
std::unique_ptr<DeviceOperand> build_on_device(RecordSource& records, const OperandSpec& spec,
                                               const BuildContext& context, cudaStream_t stream);

// The fallback: an operand built on the host (operands::build_block_matrix), uploaded.
std::unique_ptr<DeviceOperand> upload_host_operand(const BlockMatrix& matrix, OperandRole role, cudaStream_t stream);

std::int64_t device_block_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream);

// Block products of each block-row of `a` (a.rows_held() entries), counted on the device.
std::vector<std::int64_t> device_row_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream);

// Block-rows [row_begin, row_end) of the left operand `a`, copied on the device into an operand
// of their own (a must hold them; its CSC, if any, is not carried over).
std::unique_ptr<DeviceOperand> slice_device_rows(const DeviceOperand& a, std::int32_t row_begin, std::int32_t row_end,
                                                 cudaStream_t stream);

// Exact symbolic phase on the device, rows taken in batches of at most `batch_bytes` of scratch
// (one row alone may exceed it).
std::unique_ptr<DevicePattern> device_symbolic(const DeviceOperand& a, const DeviceOperand& b, std::int64_t batch_bytes,
                                               cudaStream_t stream);

// Per row of the pattern, where each column tile of `tile_cols` block-columns starts:
// rows x (col_tiles + 1) absolute tile indices (offsets only), for the dense path's work units.
std::vector<std::int64_t> column_tile_splits(const DevicePattern& pattern, std::int32_t col_tiles,
                                             std::int32_t tile_cols, cudaStream_t stream);

}  // namespace blockmm::kernels::cuda
