// The sparse GPU path's host-side plan (kernels/cuda/sparse_plan.hpp): the kernel and tiles a
// work unit for each m, work units that cover every row's tiles once, chunks of whole units in
// order within their limit, and buffers within the room. Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/sparse_plan.hpp"

namespace blockmm::kernels::cuda {
namespace {

OutputLayout random_layout(std::mt19937_64& rng, std::int32_t max_rows, int max_tiles_a_row) {
  OutputLayout layout;
  const std::int32_t rows = std::uniform_int_distribution<std::int32_t>(0, max_rows)(rng);
  layout.row_end = rows;
  layout.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int32_t r = 0; r < rows; ++r) {
    // A quarter of the rows empty, some far longer than a unit.
    const int tiles = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 0 : std::uniform_int_distribution<int>(1, max_tiles_a_row)(rng);
    layout.row_ptr[r + 1] = layout.row_ptr[r] + tiles;
  }
  return layout;
}

// 128 threads a unit: tiles of m = 1, 2, 4 take one thread each, m = 8 four (two rows each),
// m = 16 and 32 a thread a row; the generic kernel a thread a row and 32 columns.
TEST(SparsePlan, KernelAndTilesAUnitForEachBlockSize) {
  const std::pair<int, int> fixed[] = {{1, 128}, {2, 128}, {4, 128}, {8, 32}, {16, 8}, {32, 4}};
  for (const auto& [m, tiles] : fixed) {
    const SparseKernel kernel = sparse_kernel_for(m, false);
    EXPECT_FALSE(kernel.generic) << m;
    EXPECT_EQ(kernel.tiles_per_unit, tiles) << m;
    const SparseKernel generic = sparse_kernel_for(m, true);
    EXPECT_TRUE(generic.generic) << m;
    EXPECT_EQ(generic.tiles_per_unit, generic_tiles_per_unit(m)) << m;
  }
  EXPECT_EQ(sparse_kernel_for(5, false).tiles_per_unit, 128 / 5);
  EXPECT_TRUE(sparse_kernel_for(5, false).generic);
  EXPECT_EQ(sparse_kernel_for(33, false).tiles_per_unit, 1);  // 66 threads a tile
  EXPECT_EQ(sparse_kernel_for(64, false).tiles_per_unit, 1);  // 128
  EXPECT_EQ(sparse_kernel_for(100, false).tiles_per_unit, 1);  // 400 work items: more than the threads
  EXPECT_EQ(sparse_kernel_for(1, true).tiles_per_unit, 128);
}

TEST(SparsePlan, ChunksTakeWholeUnitsInOrderWithinTheirLimit) {
  std::mt19937_64 rng(11);
  for (int c = 0; c < 300; ++c) {
    const OutputLayout layout = random_layout(rng, 200, c % 2 ? 40 : 600);
    const int tiles_per_unit = std::uniform_int_distribution<int>(1, 128)(rng);
    const std::int64_t max_tiles = std::uniform_int_distribution<std::int64_t>(1, 2000)(rng);
    const std::vector<SparseChunk> chunks = make_chunks(layout, tiles_per_unit, max_tiles);
    std::int64_t unit = 0, tile = 0;
    for (const SparseChunk& chunk : chunks) {
      ASSERT_EQ(chunk.first_unit, unit);
      ASSERT_EQ(chunk.first_tile, tile);
      ASSERT_GE(chunk.units, 1);
      // Over the limit only where one unit alone is (a unit is at most tiles_per_unit tiles).
      if (chunk.units > 1) { EXPECT_LE(chunk.tiles, max_tiles); }
      EXPECT_LE(chunk.tiles, std::max<std::int64_t>(max_tiles, tiles_per_unit));
      unit += chunk.units;
      tile += chunk.tiles;
    }
    EXPECT_EQ(unit, count_units(layout, tiles_per_unit));
    EXPECT_EQ(tile, layout.tiles());
  }
}

TEST(SparsePlan, UnitsCountEachRowsTilesInRunsOfTheUnitsSize) {
  OutputLayout layout;
  layout.row_ptr = {0, 0, 1, 33, 33, 100};  // rows of 0, 1, 32, 0 and 67 tiles
  EXPECT_EQ(count_units(layout, 32), 0 + 1 + 1 + 0 + 3);
  EXPECT_EQ(count_units(layout, 1), 100);
  EXPECT_EQ(count_units(layout, 128), 3);
  EXPECT_EQ(count_units(OutputLayout{}, 8), 0);
}

// Two output buffers of the largest chunk and every unit fit the room; --chunk-size bounds a
// chunk where the room allows more; a room below one unit's chunk is a clear budget error.
TEST(SparsePlan, BuffersFitTheRoomAndChunksHoldTheChunkSize) {
  std::mt19937_64 rng(12);
  for (int c = 0; c < 300; ++c) {
    const OutputLayout layout = random_layout(rng, 300, 300);
    const int m = std::vector<int>{1, 2, 3, 4, 8, 13, 16, 32, 40}[static_cast<std::size_t>(c % 9)];
    const std::int64_t stride = 8 + 4 * std::int64_t{m} * m;
    const std::int64_t room = std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 24)(rng);
    const std::int64_t chunk_bytes = std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 22)(rng);
    try {
      const SparsePlan plan = plan_sparse(layout, m, sparse_kernel_for(m, c % 5 == 0), room, chunk_bytes, RightOperandCounts{});
      EXPECT_EQ(plan.record_bytes, stride);
      EXPECT_EQ(plan.units, count_units(layout, plan.kernel.tiles_per_unit));
      EXPECT_LE(plan.workspace_bytes(), room) << "case " << c;
      EXPECT_GE(plan.chunk_tiles, plan.kernel.tiles_per_unit);
      // Where the room holds more, a chunk is at most the chunk size (or one unit's tiles).
      EXPECT_LE(plan.chunk_tiles, std::max<std::int64_t>(plan.kernel.tiles_per_unit, std::max<std::int64_t>(1, chunk_bytes / stride)));
      for (const SparseChunk& chunk : plan.chunks) EXPECT_LE(chunk.tiles, plan.chunk_tiles);
    } catch (const ResourceError& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << e.what();
      // Only a room below the units and one unit's two buffers fails.
      const SparseKernel kernel = sparse_kernel_for(m, c % 5 == 0);
      EXPECT_LT(room - count_units(layout, kernel.tiles_per_unit) * 16, kernel.tiles_per_unit * (2 * stride + 1)) << "case " << c;
    }
  }
  // Plenty of room: chunks of the chunk size.
  OutputLayout layout;
  layout.row_ptr = {0, 1000, 2000};
  const SparseKernel kernel = sparse_kernel_for(4, false);
  const SparsePlan plan = plan_sparse(layout, 4, kernel, std::int64_t{1} << 30, 100 * 72, {});
  EXPECT_EQ(plan.chunk_tiles, 128);  // at least one unit (128 tiles of m = 4)
  const SparsePlan big = plan_sparse(layout, 4, kernel, std::int64_t{1} << 30, 1000 * 72, {});
  EXPECT_EQ(big.chunk_tiles, 1000);
  // The units need 16 bytes each too; a memory refusal by type (MemoryError in Python).
  EXPECT_THROW(plan_sparse(layout, 4, kernel, 128 * (2 * 72 + 1), 1000 * 72, {}), OutOfMemoryError);
}

// The tensor-core block kernel where asked for and m = 8, 16, 32 (else the CUDA-core kernels,
// the generic one where that is asked for), with its tiles a unit.
TEST(SparsePlan, TensorCoreKernelForBlockSizesOfEightSixteenThirtyTwo) {
  const std::pair<int, int> tensor[] = {{8, kTensorTilesPerUnit8}, {16, kTensorTilesPerUnit16}, {32, kTensorTilesPerUnit32}};
  for (const auto& [m, tiles] : tensor) {
    const SparseKernel kernel = sparse_kernel_for(m, false, true);
    EXPECT_TRUE(kernel.tensor_cores) << m;
    EXPECT_FALSE(kernel.generic) << m;
    EXPECT_EQ(kernel.tiles_per_unit, tiles) << m;
    EXPECT_LE(tiles, kThreadsPerUnit);  // the kernel's per-tile flags: one a thread
    EXPECT_FALSE(sparse_kernel_for(m, false, false).tensor_cores) << m;
    EXPECT_FALSE(sparse_kernel_for(m, true, true).tensor_cores) << m;  // the generic kernel asked for
  }
  for (const int m : {1, 2, 4, 5, 13, 23, 24, 40, 64}) EXPECT_FALSE(sparse_kernel_for(m, false, true).tensor_cores) << m;
}

// B's byte planes (2 m^2 bytes a block) are part of the tensor-core kernel's workspace, within
// the room; where they do not fit, the CUDA-core kernel; the A-row bitmap only where its words
// fit shared memory.
TEST(SparsePlan, TensorCoreWorkspaceHoldsBsBytePlanesWithinTheRoom) {
  std::mt19937_64 rng(13);
  int tensor = 0, fallback = 0;
  for (int c = 0; c < 300; ++c) {
    const OutputLayout layout = random_layout(rng, 300, 300);
    const int m = std::vector<int>{8, 16, 32}[static_cast<std::size_t>(c % 3)];
    RightOperandCounts b;
    b.block_cols = std::uniform_int_distribution<std::int64_t>(1, 600000)(rng);
    b.blocks = std::uniform_int_distribution<std::int64_t>(0, 20000)(rng);
    const std::int64_t room =
        static_cast<std::int64_t>(std::pow(2.0, std::uniform_real_distribution<double>(12, 28)(rng)));  // 4 KiB .. 256 MiB
    const SparseKernel kernel = fitting_sparse_kernel(sparse_kernel_for(m, false, true), layout, m, room, b);
    try {
      const SparsePlan plan = plan_sparse(layout, m, kernel, room, std::int64_t{1} << 22, b);
      EXPECT_LE(plan.workspace_bytes(), room) << "case " << c;
      if (kernel.tensor_cores) {
        ++tensor;
        EXPECT_EQ(plan.b_planes_bytes, b.blocks * 2 * m * m);
        EXPECT_EQ(plan.b_blocks, b.blocks);
        EXPECT_EQ(plan.bitmap_words, (b.block_cols + 31) / 32 <= kMaxBitmapWords ? (b.block_cols + 31) / 32 : 0);
        EXPECT_DOUBLE_EQ(plan.b_column, double(b.blocks) / double(b.block_cols));
      } else {
        ++fallback;
        EXPECT_EQ(plan.b_planes_bytes, 0);
        EXPECT_EQ(plan.bitmap_words, 0);
        // Only where the planes did not fit beside the units and one unit's buffers.
        EXPECT_GT(b.blocks * 2 * m * m + count_units(layout, sparse_kernel_for(m, false, true).tiles_per_unit) * 16 +
                      sparse_kernel_for(m, false, true).tiles_per_unit * (2 * (8 + 4 * m * m) + 1),
                  room) << "case " << c;
      }
    } catch (const ResourceError& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << e.what();
      EXPECT_FALSE(kernel.tensor_cores) << "case " << c;  // the tensor-core kernel is only chosen where it fits
    }
  }
  EXPECT_GT(tensor, 30);
  EXPECT_GT(fallback, 30);
}

}  // namespace
}  // namespace blockmm::kernels::cuda
