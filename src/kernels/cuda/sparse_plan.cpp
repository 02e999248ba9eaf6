#include "kernels/cuda/sparse_plan.hpp"

#include <algorithm>

#include "core/record_layout.hpp"

namespace blockmm::kernels::cuda {

bool tensor_core_block_size(int m) { return m == 8 || m == 16 || m == 32; }

SparseKernel sparse_kernel_for(int m, bool generic, bool tensor_cores) {
  if (tensor_cores && !generic && tensor_core_block_size(m))
    return {m == 8 ? kTensorTilesPerUnit8 : m == 16 ? kTensorTilesPerUnit16 : kTensorTilesPerUnit32, false, true};
  switch (generic ? 0 : m) {
    case 1: return {FixedShape<1>::tiles_per_unit, false};
    case 2: return {FixedShape<2>::tiles_per_unit, false};
    case 4: return {FixedShape<4>::tiles_per_unit, false};
    case 8: return {FixedShape<8>::tiles_per_unit, false};
    case 16: return {FixedShape<16>::tiles_per_unit, false};
    case 32: return {FixedShape<32>::tiles_per_unit, false};
    default: return {generic_tiles_per_unit(m), true};
  }
}

std::int64_t count_units(const OutputLayout& layout, int tiles_per_unit) {
  std::int64_t units = 0;
  for (std::size_t r = 0; r + 1 < layout.row_ptr.size(); ++r)
    units += (layout.row_ptr[r + 1] - layout.row_ptr[r] + tiles_per_unit - 1) / tiles_per_unit;
  return units;
}

std::vector<SparseChunk> make_chunks(const OutputLayout& layout, int tiles_per_unit, std::int64_t max_tiles) {
  std::vector<SparseChunk> chunks;
  SparseChunk chunk{0, 0, 0, 0};
  std::int64_t unit = 0;
  for (std::size_t r = 0; r + 1 < layout.row_ptr.size(); ++r)
    for (std::int64_t t = layout.row_ptr[r]; t < layout.row_ptr[r + 1]; t += tiles_per_unit, ++unit) {
      const std::int64_t tiles = std::min<std::int64_t>(tiles_per_unit, layout.row_ptr[r + 1] - t);
      if (chunk.units > 0 && chunk.tiles + tiles > max_tiles) {
        chunks.push_back(chunk);
        chunk.units = 0;
      }
      if (chunk.units == 0) chunk = {unit, 0, t, 0};
      chunk.tiles += tiles;
      ++chunk.units;
    }
  if (chunk.units > 0) chunks.push_back(chunk);
  return chunks;
}

std::int64_t SparsePlan::workspace_bytes() const {
  std::int64_t largest = 0;
  for (const SparseChunk& c : chunks) largest = std::max(largest, c.tiles);
  return units * static_cast<std::int64_t>(sizeof(WorkUnit)) + 2 * largest * record_bytes + b_planes_bytes;
}

namespace {

// Device bytes beyond the output buffers: the work units and (tensor cores) B's byte planes.
std::int64_t fixed_bytes(const SparseKernel& kernel, std::int64_t units, int m, const RightOperandCounts& b) {
  return units * static_cast<std::int64_t>(sizeof(WorkUnit)) + (kernel.tensor_cores ? b.blocks * 2 * m * m : 0);
}

}  // namespace

SparseKernel fitting_sparse_kernel(const SparseKernel& wanted, const OutputLayout& layout, int m, std::int64_t room,
                                   const RightOperandCounts& b) {
  if (!wanted.tensor_cores) return wanted;
  const std::int64_t per_tile = 2 * record_bytes<std::uint32_t>(m) + 1;
  const std::int64_t need = fixed_bytes(wanted, count_units(layout, wanted.tiles_per_unit), m, b) + wanted.tiles_per_unit * per_tile;
  return need <= room ? wanted : sparse_kernel_for(m, false, false);
}

SparsePlan plan_sparse(const OutputLayout& layout, int m, const SparseKernel& kernel, std::int64_t room,
                       std::int64_t chunk_bytes, const RightOperandCounts& b) {
  SparsePlan plan;
  plan.kernel = kernel;
  plan.record_bytes = record_bytes<std::uint32_t>(m);
  const std::int64_t stride = plan.record_bytes;
  plan.units = count_units(layout, plan.kernel.tiles_per_unit);
  if (kernel.tensor_cores) {
    plan.b_blocks = b.blocks;
    plan.b_planes_bytes = b.blocks * 2 * m * m;
    const std::int64_t words = (b.block_cols + 31) / 32;
    plan.bitmap_words = words <= kMaxBitmapWords ? static_cast<std::int32_t>(words) : 0;
    plan.b_column = b.block_cols > 0 ? static_cast<double>(b.blocks) / static_cast<double>(b.block_cols) : 0;
  }
  // Per tile: two output buffers and a share of a work unit; the units (and B's planes) are all
  // on the device.
  const std::int64_t fixed = fixed_bytes(kernel, plan.units, m, b);
  const std::int64_t per_tile = 2 * stride + 1;
  const std::int64_t min_tiles = plan.kernel.tiles_per_unit;
  if (room - fixed < min_tiles * per_tile) throw budget_error(room, fixed + min_tiles * per_tile);
  plan.chunk_tiles =
      std::max(min_tiles, std::min((room - fixed) / per_tile, std::max<std::int64_t>(1, chunk_bytes / stride)));
  plan.chunks = make_chunks(layout, plan.kernel.tiles_per_unit, plan.chunk_tiles);
  return plan;
}

}  // namespace blockmm::kernels::cuda
