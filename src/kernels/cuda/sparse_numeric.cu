#include "kernels/cuda/sparse_numeric.cuh"

#include <cub/device/device_scan.cuh>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/tensor_tile_kernel.cuh"
#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels::cuda {
namespace {

// The tensor-core block kernel for block size M, with the A-row bitmap's shared memory.
template <int M>
void launch_tensor(const SparsePlan& plan, const TileParams& params, const std::uint8_t* b_planes, std::int64_t units,
                   cudaStream_t stream) {
  const std::size_t shared_bytes = 2 * sizeof(std::uint32_t) * static_cast<std::size_t>(plan.bitmap_words);
  if (shared_bytes > 48 * 1024)  // above the default, asked for
    BLOCKMM_CUDA_CHECK(cudaFuncSetAttribute(tensor_tile_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shared_bytes)));
  tensor_tile_kernel<M><<<static_cast<unsigned int>(units), kThreadsPerUnit, shared_bytes, stream>>>(
      params, b_planes, plan.bitmap_words, static_cast<float>(plan.b_column));
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
}

// B's blocks as the tensor-core kernel's byte planes, on the compute stream.
std::uint8_t* b_planes_of(const SparsePlan& plan, const TileParams& params, ChunkPipeline& pipeline) {
  std::uint8_t* planes = pipeline.keep(DeviceArray<std::uint8_t>(static_cast<std::size_t>(plan.b_planes_bytes)));
  if (plan.b_blocks == 0) return planes;
  const std::int64_t runs = plan.b_blocks * params.m * (params.m / 8);
  const unsigned int grid = grid_for(runs);
  switch (params.m) {
    case 8: b_block_planes<8><<<grid, 256, 0, pipeline.compute()>>>(params.b_values, plan.b_blocks, planes); break;
    case 16: b_block_planes<16><<<grid, 256, 0, pipeline.compute()>>>(params.b_values, plan.b_blocks, planes); break;
    case 32: b_block_planes<32><<<grid, 256, 0, pipeline.compute()>>>(params.b_values, plan.b_blocks, planes); break;
    default: throw Error(ExitCode::other, "internal error: no tensor-core kernel for m = " + std::to_string(params.m));
  }
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  return planes;
}

void launch(const SparsePlan& plan, const TileParams& params, const std::uint8_t* b_planes, std::int64_t units,
            cudaStream_t stream) {
  const SparseKernel& kernel = plan.kernel;
  if (kernel.tensor_cores) {
    switch (params.m) {
      case 8: launch_tensor<8>(plan, params, b_planes, units, stream); return;
      case 16: launch_tensor<16>(plan, params, b_planes, units, stream); return;
      case 32: launch_tensor<32>(plan, params, b_planes, units, stream); return;
      default: throw Error(ExitCode::other, "internal error: no tensor-core kernel for m = " + std::to_string(params.m));
    }
  }
  const dim3 grid(static_cast<unsigned int>(units));
  const dim3 block(kThreadsPerUnit);
  if (kernel.generic) {
    tile_kernel_generic<<<grid, block, 0, stream>>>(params, kernel.tiles_per_unit);
  } else {
    switch (params.m) {
      case 1: tile_kernel_fixed<1><<<grid, block, 0, stream>>>(params); break;
      case 2: tile_kernel_fixed<2><<<grid, block, 0, stream>>>(params); break;
      case 4: tile_kernel_fixed<4><<<grid, block, 0, stream>>>(params); break;
      case 8: tile_kernel_fixed<8><<<grid, block, 0, stream>>>(params); break;
      case 16: tile_kernel_fixed<16><<<grid, block, 0, stream>>>(params); break;
      case 32: tile_kernel_fixed<32><<<grid, block, 0, stream>>>(params); break;
      default: throw Error(ExitCode::other, "internal error: no fixed CUDA kernel for m = " + std::to_string(params.m));
    }
  }
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
}

// The plan's work units, written on the device from the pattern's row pointers.
DeviceArray<WorkUnit> device_units(const DevicePattern& pattern, int tiles_per_unit, std::int64_t count,
                                   cudaStream_t stream) {
  const std::int32_t rows = pattern.layout().row_end - pattern.layout().row_begin;
  DeviceArray<WorkUnit> units(static_cast<std::size_t>(count));
  if (count == 0) return units;
  DeviceArray<std::int64_t> per_row(static_cast<std::size_t>(rows)), first_unit(static_cast<std::size_t>(rows));
  row_unit_counts<<<grid_for(rows), 256, 0, stream>>>(pattern.d_row_ptr.get(), rows, tiles_per_unit, per_row.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, per_row.get(), first_unit.get(), rows, stream));
  DeviceArray<std::byte> scratch(bytes);
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch.get(), bytes, per_row.get(), first_unit.get(), rows, stream));
  fill_work_units<<<grid_for(std::int64_t{rows} * 32), 256, 0, stream>>>(pattern.d_row_ptr.get(), first_unit.get(), rows,
                                                                        tiles_per_unit, units.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // per_row, first_unit and scratch go now
  return units;
}

}  // namespace

void numeric_sparse(const DevicePattern& pattern, const SparsePlan& plan, const TileParams& params, RecordSink& sink,
                    const NumericOptions& options, ChunkPipeline& pipeline, NumericReport& report) {
  std::vector<OutputChunk> chunks;
  for (const SparseChunk& c : plan.chunks) chunks.push_back({c.first_tile, c.tiles});
  const WorkUnit* d_units = pipeline.keep(device_units(pattern, plan.kernel.tiles_per_unit, plan.units, pipeline.compute()));
  const std::uint8_t* b_planes = plan.kernel.tensor_cores ? b_planes_of(plan, params, pipeline) : nullptr;

  pipeline.run(chunks, plan.record_bytes, sink, options, report, [&](std::size_t c, std::byte* out) {
    const SparseChunk& chunk = plan.chunks[c];
    TileParams p = params;
    p.units = d_units + chunk.first_unit;
    p.tile_col = pattern.d_col.get() + chunk.first_tile;
    p.chunk_first_tile = chunk.first_tile;
    p.out = out;
    launch(plan, p, b_planes, chunk.units, pipeline.compute());
  });
}

}  // namespace blockmm::kernels::cuda
