// The dense GPU path's host-side plan (kernels/cuda/dense_plan.hpp): when the path pays, which
// encoding keeps sums exact, tile sizes within the budget, and row chunks that cover every row
// once. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// int8 for every order the dense path takes (issue 40: n > 131056 fell to float64 GEMMs, ten
// times slower); float64 only where the choices ask for it.
TEST(DensePlan, Int8PlanesForEveryOrderTheDensePathTakes) {
  const CudaChoices automatic;
  EXPECT_EQ(dense_encoding(kInt8MaxPiece, 65535, automatic), DenseEncoding::int8_planes);
  EXPECT_EQ(dense_encoding(kInt8MaxPiece + 1, 65535, automatic), DenseEncoding::int8_planes);
  EXPECT_EQ(dense_encoding(kDenseMaxOrder - 1, 1023, automatic), DenseEncoding::int8_split);
  EXPECT_EQ(dense_encoding(kDenseMaxOrder - 1, 1, automatic), DenseEncoding::int8_narrow);
  CudaChoices f64;
  f64.dense_type = CudaChoices::DenseType::float64;
  EXPECT_EQ(dense_encoding(1024, 1, f64), DenseEncoding::float64);
  EXPECT_EQ(dense_encoding(kInt8MaxPiece + 1, 65535, f64), DenseEncoding::float64);
  // The widest int8 bound: padded K times 2^14 (the largest |X'Y'|, and above 127^2) stays below 2^31.
  EXPECT_LT(pad_to_planes(kInt8MaxPiece) * (std::int64_t{1} << 14), std::int64_t{1} << 31);
  EXPECT_EQ(kInt8MaxPiece % kPlanePad, 0);
  EXPECT_LT(127 * 127, 1 << 14);
  // The plane sums over a whole vector of the largest order stay inside int32 too.
  EXPECT_LT(128 * kDenseMaxOrder, std::int64_t{1} << 31);
}

// The largest product of two plane entries of values up to v, by brute force over every value:
// int8_narrow u itself, int8_split hi, lo and hi + lo, int8_planes the offset bytes.
std::int64_t largest_plane_product(DenseEncoding encoding, std::uint32_t v) {
  std::int64_t entry = 0;
  for (std::uint32_t u = 0; u <= v; ++u) {
    if (encoding == DenseEncoding::int8_narrow) entry = std::max<std::int64_t>(entry, u);
    if (encoding == DenseEncoding::int8_split) entry = std::max<std::int64_t>(entry, (u >> kSplitShift) + (u & 63));
    if (encoding == DenseEncoding::int8_planes)
      for (const std::uint32_t byte : {u >> 8, u & 255}) entry = std::max<std::int64_t>(entry, std::abs(int(byte) - 128));
  }
  return entry * entry;
}

// Every K piece's int32 sums are exact: the piece limit times the largest product of two plane
// entries (by brute force over the values) stays below 2^31, for values at the encodings' edges
// and between; pieces are multiples of the int8 padding.
TEST(DensePlan, KPieceLimitKeepsEveryInt32SumExact) {
  const std::pair<DenseEncoding, std::vector<std::uint32_t>> cases[] = {
      {DenseEncoding::int8_narrow, {1, 2, 50, 100, 126, 127}},
      {DenseEncoding::int8_split, {128, 500, 1023, 1024, 2000, 4095, 4096, 4222}},
      {DenseEncoding::int8_planes, {4223, 30000, 65535}}};
  for (const auto& [encoding, values] : cases)
    for (const std::uint32_t v : values) {
      const std::int64_t limit = int8_piece_limit(encoding, v);
      EXPECT_EQ(limit % kPlanePad, 0);
      EXPECT_GE(limit, kInt8MaxPiece) << v;
      EXPECT_LT(limit * largest_plane_product(encoding, v), std::int64_t{1} << 31) << int(encoding) << " " << v;
      // An unknown largest value assumes the widest planes.
      EXPECT_LE(int8_piece_limit(encoding, 0), limit);
    }
  EXPECT_EQ(int8_piece_limit(DenseEncoding::int8_planes, 65535), kInt8MaxPiece);
  EXPECT_EQ(int8_piece_limit(DenseEncoding::int8_planes, 0), kInt8MaxPiece);
  // Narrow values allow longer pieces: values up to 1023 split into planes of at most 15 + 63.
  EXPECT_GT(int8_piece_limit(DenseEncoding::int8_split, 1023), 3 * kInt8MaxPiece / 2);
}

// The inner dimension in as few pieces as the limit allows, equal but the last, covering every
// entry of the padded vectors once; one piece (no int64 sums) where K is within the limit; the
// pieces' int64 sums in the workspace otherwise, and the workspace within the room.
TEST(DensePlan, KPiecesCoverTheInnerDimensionEachWithinItsBound) {
  std::mt19937_64 rng(40);
  int several = 0;  // plans of several pieces checked
  const DenseEncoding encodings[] = {DenseEncoding::int8_narrow, DenseEncoding::int8_split, DenseEncoding::int8_planes,
                                     DenseEncoding::float64};
  for (int c = 0; c < 400; ++c) {
    const DenseEncoding encoding = encodings[c % 4];
    const std::int32_t m = std::vector<std::int32_t>{1, 4, 8, 13, 32}[static_cast<std::size_t>(c / 4 % 5)];
    const std::int64_t n = c < 8 ? (c % 2 ? kInt8MaxPiece + 1 : kInt8MaxPiece) / m * m
                                 : m * std::uniform_int_distribution<std::int64_t>(1, (kDenseMaxOrder - 1) / m)(rng);
    const std::uint32_t largest = encoding == DenseEncoding::int8_narrow  ? std::uniform_int_distribution<std::uint32_t>(0, 127)(rng)
                                  : encoding == DenseEncoding::int8_split ? std::uniform_int_distribution<std::uint32_t>(128, 4222)(rng)
                                                                          : std::uniform_int_distribution<std::uint32_t>(0, 65535)(rng);
    const std::int64_t room = std::uniform_int_distribution<std::int64_t>(std::int64_t{1} << 28, std::int64_t{1} << 40)(rng);
    DenseProblem pr = problem(std::min<std::int64_t>(n, 4096 / m * m), m, room);
    pr.n = n;  // a few rows of a long inner dimension: the tiles count stays small
    pr.rows = 8;
    pr.tiles = 8;
    pr.largest_value = largest;
    const std::vector<std::int64_t> row_ptr{0, 1, 2, 3, 4, 5, 6, 7, 8};
    const std::string what = "n=" + std::to_string(n) + " m=" + std::to_string(m) + " encoding " +
                             std::to_string(int(encoding)) + " largest " + std::to_string(largest) + " room " +
                             std::to_string(room);
    DensePlan plan;
    try {
      plan = plan_dense(pr, encoding, row_ptr);
    } catch (const ResourceError& e) {  // a room below one tile's vectors: said so
      EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << what;
      continue;
    }
    if (encoding == DenseEncoding::float64) {
      EXPECT_EQ(plan.k_pieces, 1) << what;
      EXPECT_EQ(plan.k_piece, n) << what;
      continue;
    }
    const std::int64_t limit = int8_piece_limit(encoding, largest);
    EXPECT_EQ(plan.k_pieces, (plan.k_pitch + limit - 1) / limit) << what;  // as few as the limit allows
    std::int64_t next = 0;
    for (std::int32_t q = 0; q < plan.k_pieces; ++q) {
      const KPiece piece = k_piece_at(plan, q);
      ASSERT_EQ(piece.begin, next) << what << " piece " << q;
      ASSERT_GT(piece.length, 0) << what << " piece " << q;
      EXPECT_LE(piece.length, limit) << what << " piece " << q;
      EXPECT_EQ(piece.begin % kPlanePad, 0) << what;  // 16-byte aligned offsets into the vectors
      EXPECT_EQ(piece.length % kPlanePad, 0) << what;
      if (q + 1 < plan.k_pieces) { EXPECT_EQ(piece.length, plan.k_piece) << what; }
      next += piece.length;
    }
    EXPECT_EQ(next, plan.k_pitch) << what;
    several += plan.k_pieces > 1;
    EXPECT_EQ(plan.workspace.piece_sums, plan.k_pieces > 1 ? plan.workspace.products : 0) << what;
    if (n <= kInt8MaxPiece) { EXPECT_EQ(plan.k_pieces, 1) << what; }
    if (encoding == DenseEncoding::int8_planes && n > kInt8MaxPiece) { EXPECT_GE(plan.k_pieces, 2) << what; }
    EXPECT_LE(plan.workspace.bytes() + pr.tiles * 20, pr.room) << what;
  }
  EXPECT_GT(several, 100);
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
        // The tiles, the products of every B tile and the reserved columns and units fit the
        // room; the workspace is the largest row tile's A tile, one B tile, and the products.
        EXPECT_LE(plan.workspace.bytes() + pr.tiles * 20, room) << "n=" << n << " m=" << m << " room=" << room;
        EXPECT_LE(plan.row_tile_rows_max, plan.max_rows_per_tile);
        const DenseWorkspace expected =
            dense_workspace(encoding, n, plan.k_pitch, plan.k_pieces, std::int64_t{plan.row_tile_rows_max} * m,
                            std::int64_t{plan.cols_per_tile} * m, plan.col_tiles);
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

// What the dense path allocates is the plan's workspace: the largest row tile's A tile (one
// chunk of 5 rows where B stays resident; where B is in column tiles, as many whole chunks as
// an A tile holds), one B tile, and the products of every B tile, in the encoding's buffers.
TEST(DensePlan, WorkspaceIsTheLargestRowTilesTilesInTheEncodingsBuffers) {
  for (const bool wide : {false, true}) {
    DenseProblem pr = problem(16384, 8, wide ? std::int64_t{1} << 30 : std::int64_t{40} << 30);
    pr.chunk_bytes = 5 * 2048 * pr.record_bytes;  // 5 full rows of 2048 tiles a chunk
    for (const DenseEncoding encoding : {DenseEncoding::int8_narrow, DenseEncoding::int8_split, DenseEncoding::int8_planes,
                                         DenseEncoding::float64}) {
      SCOPED_TRACE(std::string(wide ? "B in column tiles, " : "B resident, ") + describe(encoding));
      const DensePlan plan = plan_full(pr, encoding);
      ASSERT_EQ(plan.chunk_rows.size(), std::size_t{2048 / 5 + 2});
      ASSERT_GE(plan.max_rows_per_tile, 5);
      EXPECT_EQ(plan.b_resident, !wide);
      // B resident: a row tile a chunk (its GEMMs beside the copy-backs of the chunks before).
      // B in column tiles: as many whole chunks as an A tile holds (all 2048 rows where they fit).
      if (!wide)
        EXPECT_EQ(plan.row_tile_rows_max, 5);
      else
        EXPECT_EQ(plan.row_tile_rows_max, plan.max_rows_per_tile >= 2048 ? 2048 : plan.max_rows_per_tile / 5 * 5);
      if (!wide) { EXPECT_EQ(plan.row_tile_chunks.size(), plan.chunk_rows.size()); }
      const DenseWorkspace& w = plan.workspace;
      const std::int64_t rows = std::int64_t{plan.row_tile_rows_max} * 8, cols = std::int64_t{plan.cols_per_tile} * 8;
      if (encoding == DenseEncoding::float64) {
        EXPECT_EQ(w.a_float64, rows * 16384);
        EXPECT_EQ(w.b_float64, 16384 * cols);
        EXPECT_EQ(w.c_float64, rows * cols * plan.col_tiles);
        EXPECT_EQ(w.a_planes + w.b_planes + w.products + w.a_sums + w.b_sums, 0);
        EXPECT_EQ(w.bytes(), 8 * (rows * 16384 + 16384 * cols + rows * cols * plan.col_tiles));
      } else {
        EXPECT_EQ(w.a_float64 + w.b_float64 + w.c_float64, 0);
        EXPECT_EQ(w.a_planes, planes_of(encoding) * pad_to_planes(rows) * plan.k_pitch);
        EXPECT_EQ(w.b_planes, planes_of(encoding) * pad_to_planes(cols) * plan.k_pitch);
        EXPECT_EQ(w.products, products_of(encoding) * pad_to_planes(rows) * pad_to_planes(cols) * plan.col_tiles);
        const bool sums = encoding == DenseEncoding::int8_planes;
        EXPECT_EQ(w.a_sums, sums ? 2 * pad_to_planes(rows) : 0);
        EXPECT_EQ(w.b_sums, sums ? 2 * pad_to_planes(cols) * plan.col_tiles : 0);
        EXPECT_EQ(w.bytes(), w.a_planes + w.b_planes + 4 * (w.products + w.a_sums + w.b_sums));
      }
      EXPECT_LE(w.bytes() + pr.tiles * 20, pr.room);
    }
  }
}

// Row tiles take whole consecutive chunks, every chunk once, at most the A tile's rows together
// (a chunk alone where it is longer); B is then expanded once a row tile, not once a chunk.
TEST(DensePlan, RowTilesGroupWholeChunksWithinTheATilesRows) {
  std::mt19937_64 rng(19);
  for (int c = 0; c < 200; ++c) {
    std::vector<std::int32_t> chunk_rows{0};
    const int chunks = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int k = 0; k < chunks; ++k) chunk_rows.push_back(chunk_rows.back() + std::uniform_int_distribution<int>(1, 30)(rng));
    const std::int32_t max_rows = std::uniform_int_distribution<std::int32_t>(1, 100)(rng);
    const std::vector<std::int32_t> first = dense_row_tiles(chunk_rows, max_rows);
    ASSERT_EQ(first.front(), 0);
    ASSERT_EQ(first.back(), chunks);
    for (std::size_t t = 0; t + 1 < first.size(); ++t) {
      ASSERT_LT(first[t], first[t + 1]);
      const std::int32_t rows = chunk_rows[first[t + 1]] - chunk_rows[first[t]];
      if (first[t + 1] - first[t] > 1) { EXPECT_LE(rows, max_rows); }
      // The next chunk would not have fitted (as many chunks as fit).
      if (first[t + 1] < chunks) { EXPECT_GT(chunk_rows[first[t + 1] + 1] - chunk_rows[first[t]], max_rows); }
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
      if (r1 - r0 > 1) { EXPECT_LE(row_ptr[r1] - row_ptr[r0], plan.chunk_tiles); }
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
