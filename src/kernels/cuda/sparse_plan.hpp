// The sparse numeric path's plan, on the host only (as dense_plan.hpp is the dense path's):
// which tile kernel runs for block size m and how many output tiles one work unit (a thread
// block) takes, how the pattern's rows cut into work units, and how consecutive units group into
// chunks whose two output buffers and the units fit the device memory left. Pure C++, compiled
// in every build, so that its unit tests run where there is no GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/block_matrix.hpp"
#include "kernels/cuda/budget_error.hpp"

namespace blockmm::kernels::cuda {

constexpr int kThreadsPerUnit = 128;

// A run of output tiles of one block-row, computed by one thread block.
struct WorkUnit {
  std::int64_t first_tile;  // panel tile index of the unit's first tile
  std::int32_t row;         // panel row (relative to the A panel's first row)
  std::int32_t tiles;       // tiles in this unit
};

// Threads that share one tile, and tiles per work unit, for compile-time block size M (the
// fixed kernels: m = 1, 2, 4, 8, 16, 32), so that a thread block has 128 threads even for m = 1.
template <int M>
struct FixedShape {
  static constexpr int rows_per_thread = M <= 4 ? M : (M == 8 ? 2 : 1);
  static constexpr int threads_per_tile = M / rows_per_thread;
  static constexpr int tiles_per_unit = kThreadsPerUnit / threads_per_tile;
};

// Generic kernel (any m): a thread handles one row and up to 32 columns of a tile.
constexpr int kGenericColumns = 32;
inline int generic_column_chunks(int m) { return (m + kGenericColumns - 1) / kGenericColumns; }
inline int generic_threads_per_tile(int m) { return m * generic_column_chunks(m); }
inline int generic_tiles_per_unit(int m) {
  const int t = kThreadsPerUnit / generic_threads_per_tile(m);
  return t > 0 ? t : 1;
}

// The tensor-core block kernel (tensor_tile_kernel.cuh) for m = 8, 16, 32: tiles a work unit
// (a warp a tile at m = 8 and 16, four warps a tile at m = 32, several tiles a warp, so that the
// unit's A-row bitmap serves many), and the largest bitmap of an A row's block columns it keeps
// in shared memory (two 4-byte words a 32 columns: 64 KiB, p up to 262 144).
constexpr int kTensorTilesPerUnit8 = 32, kTensorTilesPerUnit16 = 16, kTensorTilesPerUnit32 = 4;
constexpr std::int64_t kMaxBitmapWords = 8192;
bool tensor_core_block_size(int m);  // m = 8, 16, 32

// Kernel choice for block size m: the tensor-core block kernel where asked for and m allows, else
// a compile-time instantiation of the CUDA-core tile kernel, or the generic one (always, where
// `generic` asks for it).
struct SparseKernel {
  int tiles_per_unit = 1;
  bool generic = true;
  bool tensor_cores = false;
};
SparseKernel sparse_kernel_for(int m, bool generic, bool tensor_cores = false);

// Work units: each row's tiles cut into runs of at most tiles_per_unit. The host walks its row
// pointers for their number and the chunks; the list itself is written on the device (with a
// million rows and units, a host list and its upload cost more than the kernels).
std::int64_t count_units(const OutputLayout& layout, int tiles_per_unit);

struct SparseChunk {
  std::int64_t first_unit, units, first_tile, tiles;
};

// Consecutive units of at most max_tiles tiles together (at least one unit a chunk).
std::vector<SparseChunk> make_chunks(const OutputLayout& layout, int tiles_per_unit, std::int64_t max_tiles);

// What the sparse plan needs of the right operand: its blocks and block-columns (p).
struct RightOperandCounts {
  std::int64_t blocks = 0;
  std::int64_t block_cols = 0;
};

// The tensor-core kernel needs B's blocks once more, as byte planes (2 m^2 bytes each), beside
// the work units and one unit's chunk: `wanted` where they fit `room`, else the CUDA-core kernel
// for m.
SparseKernel fitting_sparse_kernel(const SparseKernel& wanted, const OutputLayout& layout, int m, std::int64_t room,
                                   const RightOperandCounts& b);

struct SparsePlan {
  SparseKernel kernel;
  std::int64_t units = 0;        // work units of the pattern (all on the device at once)
  std::int64_t chunk_tiles = 0;  // output tiles a chunk may hold
  std::vector<SparseChunk> chunks;
  std::int64_t record_bytes = 0;
  // The tensor-core kernel: B's byte planes (bytes), the A-row bitmap's words (0: it does not
  // fit shared memory, every unit walks), B's average column length (the bitmap's choice).
  std::int64_t b_planes_bytes = 0;
  std::int64_t b_blocks = 0;
  std::int32_t bitmap_words = 0;
  double b_column = 0;
  // Device bytes the path allocates: the work units, two output buffers of the largest chunk,
  // and B's byte planes.
  std::int64_t workspace_bytes() const;
};

// The plan for a pattern of `layout` with block size m and kernel `kernel` (fitting_sparse_kernel),
// in `room` device bytes beyond the operands and the pattern, chunks of at most `chunk_bytes` of
// output (--chunk-size) where the room allows. Throws ResourceError (budget_error) when the
// room cannot hold one unit's chunk.
SparsePlan plan_sparse(const OutputLayout& layout, int m, const SparseKernel& kernel, std::int64_t room,
                       std::int64_t chunk_bytes, const RightOperandCounts& b);

}  // namespace blockmm::kernels::cuda
