#include "kernels/cuda/sparse_plan.hpp"

#include <algorithm>

#include "core/record_layout.hpp"

namespace blockmm::kernels::cuda {

SparseKernel sparse_kernel_for(int m, bool generic) {
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
  return units * static_cast<std::int64_t>(sizeof(WorkUnit)) + 2 * largest * record_bytes;
}

SparsePlan plan_sparse(const OutputLayout& layout, int m, bool generic, std::int64_t room, std::int64_t chunk_bytes) {
  SparsePlan plan;
  plan.kernel = sparse_kernel_for(m, generic);
  plan.record_bytes = record_bytes<std::uint32_t>(m);
  const std::int64_t stride = plan.record_bytes;
  plan.units = count_units(layout, plan.kernel.tiles_per_unit);
  // Per tile: two output buffers and a share of a work unit; the units are all on the device.
  const std::int64_t units_bytes = plan.units * static_cast<std::int64_t>(sizeof(WorkUnit));
  const std::int64_t per_tile = 2 * stride + 1;
  const std::int64_t min_tiles = plan.kernel.tiles_per_unit;
  if (room - units_bytes < min_tiles * per_tile) throw budget_error(room, units_bytes + min_tiles * per_tile);
  plan.chunk_tiles =
      std::max(min_tiles, std::min((room - units_bytes) / per_tile, std::max<std::int64_t>(1, chunk_bytes / stride)));
  plan.chunks = make_chunks(layout, plan.kernel.tiles_per_unit, plan.chunk_tiles);
  return plan;
}

}  // namespace blockmm::kernels::cuda
