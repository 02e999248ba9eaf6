// The cuda backend's operands, built where they are used: records are read by many threads into
// pinned staging buffers and uploaded while the read goes on, then sorted, checked and
// compressed on the device (CUB radix sorts, scans, selects). Only counts and offsets come back
// to the host. (The symbolic phase on these operands: device_symbolic.cuh.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/backend_steps.hpp"
#include "core/record_source.hpp"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/device_operands.cuh"
#include "kernels/cuda/staging_memory.cuh"

namespace blockmm::kernels::cuda {

struct BuildContext {
  int device = 0;
  int threads = 1;                // reading threads
  StagingBuffers* staging = nullptr;
  // Where the build's time went, added to: reading + uploading (pinning staging slots, part of
  // it, also on its own), and the device work after it.
  StepSeconds* read_upload_seconds = nullptr;
  StepSeconds* pin_seconds = nullptr;
  StepSeconds* device_seconds = nullptr;
};

// Throws InputError (spec.duplicate_message) on a duplicate block.
std::unique_ptr<DeviceOperand> build_on_device(RecordSource& records, const OperandSpec& spec,
                                               const BuildContext& context, cudaStream_t stream);

// The fallback: an operand built on the host (operands::build_block_matrix), uploaded; or, where
// `in_host_memory`, copied into pinned host memory that the kernels read in place (a left operand
// the device memory cannot hold beside the rest).
std::unique_ptr<DeviceOperand> upload_host_operand(const BlockMatrix& matrix, OperandRole role, bool in_host_memory,
                                                   cudaStream_t stream);

// Block-rows [row_begin, row_end) of the left operand `a`, copied into device memory as an operand
// of their own (a must hold them; its CSC, if any, is not carried over).
std::unique_ptr<DeviceOperand> slice_device_rows(const DeviceOperand& a, std::int32_t row_begin, std::int32_t row_end,
                                                 cudaStream_t stream);

// A copy of `from` (held on GPU from.device) on GPU `to_device`, the current device: every array
// copied between the GPUs (directly where CudaStart enabled peer access), the host copies of its
// pointers copied on the host; an operand in host memory shares that memory.
std::unique_ptr<DeviceOperand> copy_device_operand(const DeviceOperand& from, int to_device, cudaStream_t stream);

}  // namespace blockmm::kernels::cuda
