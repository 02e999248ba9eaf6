// The dense numeric path: panels of A and B expanded to dense tiles (int8 planes, as few as the
// values allow, or float64: dense_kernels.cuh), multiplied by cuBLAS, and the pattern's tiles
// gathered back into records, in the chunks and buffers dense_plan.hpp decided.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/record_sink.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/chunk_pipeline.cuh"
#include "kernels/cuda/cublas_session.cuh"
#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/device_operands.cuh"
#include "kernels/cuda/tile_params.hpp"

namespace blockmm::kernels::cuda {

// The largest value of both operands' blocks (which int8 encoding is exact): one pass over
// their values at memory speed, small beside the GEMMs it chooses.
std::uint32_t operands_largest_value(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream);

// `params` holds the operands (A in CSR, B in CSC) and the zero-tile counter; `steps` receives
// the path's setup and its wait for cuBLAS (--stats).
void numeric_dense(const DeviceOperand& a, const DeviceOperand& b, const DevicePattern& pattern, const DensePlan& plan,
                   const TileParams& params, CublasSession& cublas, RecordSink& sink, const NumericOptions& options,
                   ChunkPipeline& pipeline, NumericReport& report, BackendSteps& steps);

}  // namespace blockmm::kernels::cuda
