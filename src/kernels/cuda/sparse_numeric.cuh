// The sparse numeric path: the pattern's tiles computed by the two-pointer tile kernels
// (tile_kernel.cuh), chunk by chunk as sparse_plan.hpp cut them, through the chunk pipeline.
#pragma once

#include "core/record_sink.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/chunk_pipeline.cuh"
#include "kernels/cuda/device_operands.cuh"
#include "kernels/cuda/sparse_plan.hpp"
#include "kernels/cuda/tile_params.hpp"

namespace blockmm::kernels::cuda {

// `params` holds the operands and the zero-tile counter; the chunk's fields are set here.
void numeric_sparse(const DevicePattern& pattern, const SparsePlan& plan, const TileParams& params, RecordSink& sink,
                    const NumericOptions& options, ChunkPipeline& pipeline, NumericReport& report);

}  // namespace blockmm::kernels::cuda
