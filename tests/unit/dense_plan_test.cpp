// The dense GPU path's host-side plan (kernels/cuda/dense_plan.hpp): when the path pays, which
// encoding keeps sums exact, tile sizes within the budget, and row chunks that cover every row
// once. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "kernels/cuda/dense_plan.hpp"

namespace blockmm::kernels::cuda {
namespace {

DenseProblem problem(std::int64_t n, std::int32_t m, std::int64_t room) {
  DenseProblem pr;
  pr.n = n;
  pr.m = m;
  pr.rows = static_cast<std::int32_t>(n / m);
  pr.tiles = (n / m) * (n / m);
  // p^3 block products (every pair), kept in range for the largest orders tested.
  pr.block_products = pr.tiles > INT64_MAX / (n / m) ? INT64_MAX : pr.tiles * (n / m);
  pr.room = room;
  pr.chunk_bytes = std::int64_t{256} << 20;
  pr.record_bytes = 8 + 4 * std::int64_t{m} * m;
  return pr;
}

// The output tiles by block-row of a problem whose every row holds all its p tiles.
std::vector<std::int64_t> full_rows(const DenseProblem& pr) {
  std::vector<std::int64_t> row_ptr(static_cast<std::size_t>(pr.rows) + 1);
  for (std::size_t r = 0; r < row_ptr.size(); ++r) row_ptr[r] = static_cast<std::int64_t>(r) * (pr.n / pr.m);
  return row_ptr;
}

DensePlan plan_full(const DenseProblem& pr, DenseEncoding encoding) { return plan_dense(pr, encoding, full_rows(pr)); }

TEST(DensePlan, PaysAboveTheDenseFractionUnlessForced) {
  DenseProblem pr = problem(4096, 4, std::int64_t{1} << 34);
  const CudaChoices automatic;
  EXPECT_TRUE(dense_path_pays(pr, automatic));
  // Block products at 4% of a dense product's multiply-adds: the sparse kernels.
  pr.block_products = static_cast<std::int64_t>(0.04 * double(pr.rows) * pr.n * pr.n / (double(pr.m) * pr.m));
  EXPECT_FALSE(dense_path_pays(pr, automatic));
  CudaChoices always;
  always.dense = CudaChoices::Dense::always;
  EXPECT_TRUE(dense_path_pays(pr, always));
  CudaChoices never;
  never.dense = CudaChoices::Dense::never;
  EXPECT_FALSE(dense_path_pays(problem(4096, 4, std::int64_t{1} << 34), never));
  // float64 stops being exact at n = 2^21: never dense there, whatever the choice.
  EXPECT_FALSE(dense_path_pays(problem(kDenseMaxOrder, 1, std::int64_t{1} << 34), always));
  DenseProblem empty = problem(4096, 4, std::int64_t{1} << 34);
  empty.tiles = 0;
  EXPECT_FALSE(dense_path_pays(empty, always));
}

TEST(DensePlan, Int8PlanesWhereTheirSumsAreExact) {
  const CudaChoices automatic;
  EXPECT_EQ(dense_encoding(kInt8MaxOrder, 65535, automatic), DenseEncoding::int8_planes);
  EXPECT_EQ(dense_encoding(kInt8MaxOrder + 1, 65535, automatic), DenseEncoding::float64);
  EXPECT_EQ(dense_encoding(kInt8MaxOrder + 1, 1, automatic), DenseEncoding::float64);
  CudaChoices f64;
  f64.dense_type = CudaChoices::DenseType::float64;
  EXPECT_EQ(dense_encoding(1024, 1, f64), DenseEncoding::float64);
  // The int8 bound: padded K times 2^14 (the largest |X'Y'|, and above 127^2) stays below 2^31.
  EXPECT_LT(pad_to_planes(kInt8MaxOrder) * (std::int64_t{1} << 14), std::int64_t{1} << 31);
  EXPECT_LT(127 * 127, 1 << 14);
}

// The fewest products the values allow: one plane up to 127, three split planes up to 4222,
// the four byte-plane products above (or whenever they are asked for).
TEST(DensePlan, NarrowValuesTakeFewerProducts) {
  const CudaChoices automatic;
  EXPECT_EQ(dense_encoding(4096, 0, automatic), DenseEncoding::int8_narrow);
  EXPECT_EQ(dense_encoding(4096, 127, automatic), DenseEncoding::int8_narrow);
  EXPECT_EQ(dense_encoding(4096, 128, automatic), DenseEncoding::int8_split);
  EXPECT_EQ(dense_encoding(4096, 4222, automatic), DenseEncoding::int8_split);
  EXPECT_EQ(dense_encoding(4096, 4223, automatic), DenseEncoding::int8_planes);
  EXPECT_EQ(dense_encoding(4096, 65535, automatic), DenseEncoding::int8_planes);
  CudaChoices planes;
  planes.dense_type = CudaChoices::DenseType::byte_planes;
  EXPECT_EQ(dense_encoding(4096, 1, planes), DenseEncoding::int8_planes);
  EXPECT_EQ(products_of(DenseEncoding::int8_narrow), 1);
  EXPECT_EQ(products_of(DenseEncoding::int8_split), 3);
  EXPECT_EQ(products_of(DenseEncoding::int8_planes), 4);
  // Every value up to kSplitMax splits into int8 planes (hi + lo <= 127 and so hi, lo too);
  // the next one does not.
  const auto sum_of_halves = [](std::uint32_t u) { return (u >> kSplitShift) + (u & ((1u << kSplitShift) - 1)); };
  for (std::uint32_t u = 0; u <= kSplitMax; ++u) ASSERT_LE(sum_of_halves(u), 127u) << u;
  EXPECT_GT(sum_of_halves(kSplitMax + 1), 127u);
  // The split form's reassembly (2^12 hh + 2^6 (ss - hh - ll) + ll) is the product, for every
  // pair of values at the edges and a sample between.
  std::mt19937_64 rng(5);
  for (int c = 0; c < 100000; ++c) {
    const std::uint32_t x = c < 4 ? (c % 2 ? kSplitMax : 0) : std::uniform_int_distribution<std::uint32_t>(0, kSplitMax)(rng);
    const std::uint32_t y = c < 4 ? (c / 2 ? kSplitMax : 0) : std::uniform_int_distribution<std::uint32_t>(0, kSplitMax)(rng);
    const std::int64_t hx = x >> kSplitShift, lx = x & 63, hy = y >> kSplitShift, ly = y & 63;
    const std::int64_t hh = hx * hy, ll = lx * ly, ss = (hx + lx) * (hy + ly);
    ASSERT_EQ((hh << (2 * kSplitShift)) + ((ss - hh - ll) << kSplitShift) + ll, std::int64_t{x} * y) << x << " " << y;
  }
}

TEST(DensePlan, TilesFitTheRoomAndBStaysResidentWhenItFits) {
  for (const DenseEncoding encoding : {DenseEncoding::int8_narrow, DenseEncoding::int8_split, DenseEncoding::int8_planes,
                                       DenseEncoding::float64}) {
    const DensePlan roomy = plan_full(problem(16384, 8, std::int64_t{40} << 30), encoding);
    EXPECT_TRUE(roomy.b_resident);
    EXPECT_EQ(roomy.col_tiles, 1);
    EXPECT_EQ(roomy.max_rows_per_tile, static_cast<std::int32_t>(max_tile_rows(encoding) / 8));
    EXPECT_LE(roomy.workspace.bytes(), std::int64_t{40} << 30);
    std::mt19937_64 rng(3);
    for (int c = 0; c < 200; ++c) {
      const std::int32_t m = std::uniform_int_distribution<std::int32_t>(1, 16)(rng);
      const std::int64_t n = m * std::uniform_int_distribution<std::int64_t>(1, 3000)(rng);
      const std::int64_t room = std::uniform_int_distribution<std::int64_t>(std::int64_t{1} << 20, std::int64_t{1} << 32)(rng);
      const DenseProblem pr = problem(n, m, room);
      try {
        const DensePlan plan = plan_full(pr, encoding);
        EXPECT_GE(plan.cols_per_tile, 1);
        EXPECT_GE(plan.max_rows_per_tile, 1);
        EXPECT_EQ(plan.col_tiles, (n / m + plan.cols_per_tile - 1) / plan.cols_per_tile);
        EXPECT_EQ(plan.b_resident, plan.col_tiles == 1);
        // The tiles, the product and the reserved columns and units fit the room; the workspace
        // is the largest chunk's A tile and one B tile.
        EXPECT_LE(plan.workspace.bytes() + pr.tiles * 20, room) << "n=" << n << " m=" << m << " room=" << room;
        EXPECT_LE(plan.chunk_rows_max, plan.max_rows_per_tile);
        const DenseWorkspace expected = dense_workspace(encoding, n, plan.k_pitch, std::int64_t{plan.chunk_rows_max} * m,
                                                        std::int64_t{plan.cols_per_tile} * m);
        EXPECT_EQ(plan.workspace.bytes(), expected.bytes());
      } catch (const ResourceError& e) {
        EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos);
      }
    }
  }
}

// A chunk holds --chunk-size bytes of output records, unless its two buffers would pass a
// quarter of the room; never less than one tile.
TEST(DensePlan, ChunksHoldTheChunkSizeWhereTwoFitAQuarterOfTheRoom) {
  DenseProblem pr = problem(16384, 8, std::int64_t{40} << 30);
  pr.chunk_bytes = std::int64_t{256} << 20;
  EXPECT_EQ(plan_full(pr, DenseEncoding::int8_split).chunk_tiles, pr.chunk_bytes / pr.record_bytes);
  pr.room = std::int64_t{1} << 30;  // a quarter: 256 MiB, so 128 MiB a buffer
  EXPECT_EQ(plan_full(pr, DenseEncoding::int8_narrow).chunk_tiles, (std::int64_t{128} << 20) / pr.record_bytes);
  pr.room = std::int64_t{40} << 30;
  pr.chunk_bytes = 1;
  EXPECT_EQ(plan_full(pr, DenseEncoding::int8_planes).chunk_tiles, 1);
}

// What the dense path allocates is the plan's workspace: the largest chunk's A tile (fewer rows
// than an A tile may hold where the chunks are small) and one B tile, in the encoding's buffers.
TEST(DensePlan, WorkspaceIsTheLargestChunksTilesInTheEncodingsBuffers) {
  DenseProblem pr = problem(16384, 8, std::int64_t{40} << 30);
  pr.chunk_bytes = 5 * 2048 * pr.record_bytes;  // 5 full rows of 2048 tiles a chunk
  for (const DenseEncoding encoding : {DenseEncoding::int8_narrow, DenseEncoding::int8_split, DenseEncoding::int8_planes,
                                       DenseEncoding::float64}) {
    const DensePlan plan = plan_full(pr, encoding);
    ASSERT_EQ(plan.chunk_rows_max, 5);
    ASSERT_GT(plan.max_rows_per_tile, 5);
    ASSERT_EQ(plan.chunk_rows.size(), std::size_t{2048 / 5 + 2});
    const DenseWorkspace& w = plan.workspace;
    const std::int64_t rows = 5 * 8, cols = 16384;
    if (encoding == DenseEncoding::float64) {
      EXPECT_EQ(w.a_float64, rows * 16384);
      EXPECT_EQ(w.b_float64, 16384 * cols);
      EXPECT_EQ(w.c_float64, rows * cols);
      EXPECT_EQ(w.a_planes + w.b_planes + w.products + w.a_sums + w.b_sums, 0);
      EXPECT_EQ(w.bytes(), 8 * (rows * 16384 + 16384 * cols + rows * cols));
    } else {
      EXPECT_EQ(w.a_float64 + w.b_float64 + w.c_float64, 0);
      EXPECT_EQ(w.a_planes, planes_of(encoding) * pad_to_planes(rows) * plan.k_pitch);
      EXPECT_EQ(w.b_planes, planes_of(encoding) * cols * plan.k_pitch);
      EXPECT_EQ(w.products, products_of(encoding) * pad_to_planes(rows) * cols);
      const bool sums = encoding == DenseEncoding::int8_planes;
      EXPECT_EQ(w.a_sums, sums ? 2 * pad_to_planes(rows) : 0);
      EXPECT_EQ(w.b_sums, sums ? 2 * cols : 0);
      EXPECT_EQ(w.bytes(), w.a_planes + w.b_planes + 4 * (w.products + w.a_sums + w.b_sums));
    }
  }
}

TEST(DensePlan, ChunkRowsCoverEveryRowOnceWithinTheirLimits) {
  std::mt19937_64 rng(9);
  for (int c = 0; c < 100; ++c) {
    const std::int32_t rows = std::uniform_int_distribution<std::int32_t>(0, 300)(rng);
    std::vector<std::int64_t> row_ptr(static_cast<std::size_t>(rows) + 1, 0);
    for (std::int32_t r = 0; r < rows; ++r) row_ptr[r + 1] = row_ptr[r] + std::uniform_int_distribution<int>(0, 50)(rng);
    DensePlan plan;
    plan.max_rows_per_tile = std::uniform_int_distribution<std::int32_t>(1, 40)(rng);
    plan.chunk_tiles = std::uniform_int_distribution<std::int64_t>(1, 400)(rng);
    const std::vector<std::int32_t> first = dense_chunk_rows(plan, row_ptr);
    ASSERT_EQ(first.back(), rows);
    ASSERT_EQ(first.front(), 0);
    for (std::size_t k = 0; k + 1 < first.size(); ++k) {
      const std::int32_t r0 = first[k], r1 = first[k + 1];
      ASSERT_LT(r0, r1);
      EXPECT_LE(r1 - r0, plan.max_rows_per_tile);
      // More tiles than a chunk holds only when the chunk is a single row.
      if (r1 - r0 > 1) EXPECT_LE(row_ptr[r1] - row_ptr[r0], plan.chunk_tiles);
    }
  }
}

// The product that makes cuBLAS ready: the dense path's K (int8 K padded, up to kWarmUpMaxK),
// square sides of 2048 or the whole padded order below that; float64 smaller; none where it
// would pass a sixteenth of the memory free or budgeted.
TEST(DensePlan, WarmUpProductTakesTheDensePathsShapeWithinASixteenthOfTheMemory) {
  const std::int64_t plenty = std::int64_t{80} << 30;
  WarmUpProduct g1 = warm_up_product(16384, DenseEncoding::int8_split, plenty, 0);
  EXPECT_FALSE(g1.float64);
  EXPECT_EQ(g1.rows, 2048);
  EXPECT_EQ(g1.cols, 2048);
  EXPECT_EQ(g1.k, 16384);
  EXPECT_EQ(g1.bytes(), 2 * 2048 * 16384 + 4 * 2048 * 2048);
  EXPECT_EQ(warm_up_product(32768, DenseEncoding::int8_planes, plenty, 0).k, 32768);
  EXPECT_EQ(warm_up_product(100000, DenseEncoding::int8_narrow, plenty, 0).k, kWarmUpMaxK);
  const WarmUpProduct small = warm_up_product(1000, DenseEncoding::int8_narrow, plenty, 0);
  EXPECT_EQ(small.rows, 1008);  // 1000 padded to 16
  EXPECT_EQ(small.k, 1008);
  const WarmUpProduct f64 = warm_up_product(500000, DenseEncoding::float64, plenty, 0);
  EXPECT_TRUE(f64.float64);
  EXPECT_EQ(f64.rows, 2048);
  EXPECT_EQ(f64.k, kWarmUpFloat64K);
  EXPECT_EQ(f64.bytes(), 8 * (2048 + 2048) * kWarmUpFloat64K + 8 * 2048 * 2048);
  // Memory: a sixteenth of the free memory, or of a budget below it.
  EXPECT_EQ(warm_up_product(16384, DenseEncoding::int8_split, g1.bytes() * kWarmUpShare, 0).rows, 2048);
  EXPECT_EQ(warm_up_product(16384, DenseEncoding::int8_split, g1.bytes() * kWarmUpShare - 1, 0).rows, 0);
  EXPECT_EQ(warm_up_product(16384, DenseEncoding::int8_split, plenty, g1.bytes() * kWarmUpShare - 1).rows, 0);
  EXPECT_EQ(warm_up_product(16384, DenseEncoding::int8_split, plenty, g1.bytes() * kWarmUpShare).rows, 2048);
  EXPECT_EQ(warm_up_product(0, DenseEncoding::int8_split, plenty, 0).rows, 0);
}

}  // namespace
}  // namespace blockmm::kernels::cuda
