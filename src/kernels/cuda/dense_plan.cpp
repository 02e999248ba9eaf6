#include "kernels/cuda/dense_plan.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace blockmm::kernels::cuda {
int planes_of(DenseEncoding encoding) {
  switch (encoding) {
    case DenseEncoding::int8_narrow: return 1;
    case DenseEncoding::int8_split: return 3;
    case DenseEncoding::int8_planes: return 2;
    case DenseEncoding::float64: return 1;
  }
  return 1;
}

int products_of(DenseEncoding encoding) {
  switch (encoding) {
    case DenseEncoding::int8_narrow: return 1;
    case DenseEncoding::int8_split: return 3;
    case DenseEncoding::int8_planes: return 4;
    case DenseEncoding::float64: return 1;
  }
  return 1;
}

std::int64_t max_tile_rows(DenseEncoding encoding) {
  const bool plane_a_gemm = encoding == DenseEncoding::int8_narrow || encoding == DenseEncoding::int8_split;
  return plane_a_gemm ? kMaxNarrowTileRows : kMaxDenseTileRows;
}

const char* describe(DenseEncoding encoding) {
  switch (encoding) {
    case DenseEncoding::int8_narrow: return "dense int8 one-plane tiles (cuBLAS)";
    case DenseEncoding::int8_split: return "dense int8 split-plane tiles (cuBLAS)";
    case DenseEncoding::int8_planes: return "dense int8 byte-plane tiles (cuBLAS)";
    case DenseEncoding::float64: return "dense float64 tiles (cuBLAS)";
  }
  return "dense tiles";
}

DenseEncoding dense_encoding(std::int64_t n, std::uint32_t largest_value, const CudaChoices& choices) {
  using DenseType = CudaChoices::DenseType;
  (void)n;  // every order the dense path takes has exact int8 K pieces
  if (choices.dense_type == DenseType::float64) return DenseEncoding::float64;
  if (choices.dense_type == DenseType::byte_planes) return DenseEncoding::int8_planes;
  if (largest_value <= kNarrowMax) return DenseEncoding::int8_narrow;
  if (largest_value <= kSplitMax) return DenseEncoding::int8_split;
  return DenseEncoding::int8_planes;
}

std::int64_t int8_piece_limit(DenseEncoding encoding, std::uint32_t largest_value) {
  std::int64_t entry = 128;  // the offset byte planes' (and unknown values') largest magnitude
  if (largest_value > 0 && encoding == DenseEncoding::int8_narrow) {
    entry = std::min<std::int64_t>(largest_value, kNarrowMax);
  } else if (largest_value > 0 && encoding == DenseEncoding::int8_split) {
    entry = std::min<std::int64_t>(127, (largest_value >> kSplitShift) + std::min<std::uint32_t>(largest_value, 63));
  }
  const std::int64_t terms = ((std::int64_t{1} << 31) - 1) / (entry * entry);
  return terms / kPlanePad * kPlanePad;
}

KPiece k_piece_at(const DensePlan& plan, std::int32_t piece) {
  const std::int64_t begin = piece * plan.k_piece;
  return {begin, std::min(plan.k_piece, plan.k_pitch - begin)};
}

std::int64_t DenseWorkspace::bytes() const {
  return 8 * (a_float64 + b_float64 + c_float64 + piece_sums) + (a_planes + b_planes) + 4 * (products + a_sums + b_sums);
}

std::int64_t product_tile_stride(DenseEncoding encoding, std::int64_t rows, std::int64_t tile_cols) {
  if (encoding == DenseEncoding::float64) return rows * tile_cols;
  return products_of(encoding) * pad_to_planes(rows) * pad_to_planes(tile_cols);
}

DenseWorkspace dense_workspace(DenseEncoding encoding, std::int64_t n, std::int64_t k_pitch, std::int32_t k_pieces,
                               std::int64_t tile_rows, std::int64_t tile_cols, std::int32_t col_tiles) {
  DenseWorkspace w;
  const std::int64_t products = col_tiles * product_tile_stride(encoding, tile_rows, tile_cols);
  if (encoding == DenseEncoding::float64) {
    w.a_float64 = tile_rows * n;
    w.b_float64 = n * tile_cols;
    w.c_float64 = products;
    return w;
  }
  const std::int64_t rows = pad_to_planes(tile_rows), cols = pad_to_planes(tile_cols);
  w.a_planes = planes_of(encoding) * rows * k_pitch;
  w.b_planes = planes_of(encoding) * cols * k_pitch;
  w.products = products;
  if (k_pieces > 1) w.piece_sums = w.products;
  if (encoding == DenseEncoding::int8_planes) {  // each plane vector's sum, hi and lo; B's of every tile
    w.a_sums = 2 * rows;
    w.b_sums = 2 * cols * col_tiles;
  }
  return w;
}

DensePlan plan_dense(const DenseProblem& problem, DenseEncoding encoding, const std::vector<std::int64_t>& row_ptr) {
  const bool planes = encoding != DenseEncoding::float64;  // int8, in plane vectors
  const bool offset_sums = encoding == DenseEncoding::int8_planes;
  const auto padded = [&](std::int64_t x) { return planes ? pad_to_planes(x) : x; };
  const std::int64_t n = problem.n;
  const std::int64_t m = problem.m;
  const std::int64_t p = m > 0 ? n / m : 0;
  DensePlan plan;
  plan.encoding = encoding;
  plan.k_pitch = padded(n);
  // Equal pieces (multiples of kPlanePad, the last one shorter), as few as the bound allows:
  // the same offset into both operands' plane vectors with their full pitch as the leading
  // dimension is a GEMM over that piece.
  const std::int64_t limit = planes ? int8_piece_limit(encoding, problem.largest_value) : plan.k_pitch;
  plan.k_pieces = static_cast<std::int32_t>(std::max<std::int64_t>(1, (plan.k_pitch + limit - 1) / limit));
  plan.k_piece = planes ? pad_to_planes((plan.k_pitch + plan.k_pieces - 1) / plan.k_pieces) : plan.k_pitch;
  // At most a quarter of the room each for the A tile [ti x n], the B tile [n x tj] and the
  // product [ti x every tj]; the tiles' columns and work units (at most one a tile) are
  // reserved first.
  const std::int64_t vector_bytes = planes ? planes_of(encoding) * plan.k_pitch : 8 * n;  // an A tile row, a B tile column
  // Per output element: one piece's int32 products, and their int64 sums over the pieces.
  const std::int64_t product_bytes = planes ? (plan.k_pieces > 1 ? 12 : 4) * products_of(encoding) : 8;
  const std::int64_t pad = planes ? kPlanePad : 0;
  const std::int64_t sums_bytes = offset_sums ? 8 * (padded(kMaxDenseTileRows) + plan.k_pitch + kPlanePad * p) : 0;
  const std::int64_t reserved = problem.tiles * 20 + sums_bytes;
  const std::int64_t quarter = (problem.room - reserved) / 4;
  const std::int64_t least = 4 * vector_bytes * (m + pad) + reserved;
  if (quarter <= 0) throw budget_error(problem.room, least);
  const std::int64_t cols = std::min<std::int64_t>(p, (quarter / vector_bytes - pad) / m);
  if (cols < 1) throw budget_error(problem.room, least);
  plan.cols_per_tile = static_cast<std::int32_t>(cols);
  plan.col_tiles = static_cast<std::int32_t>((p + cols - 1) / cols);
  const std::int64_t tile_cols_max = cols * m;
  const std::int64_t width = plan.col_tiles * padded(tile_cols_max);  // the products of every B tile
  const std::int64_t rows = std::min<std::int64_t>({std::max<std::int64_t>(1, max_tile_rows(encoding) / m),
                                                    (quarter / vector_bytes - pad) / m,
                                                    (quarter / (product_bytes * width) - pad) / m});
  if (rows < 1) throw budget_error(problem.room, least);
  plan.max_rows_per_tile = static_cast<std::int32_t>(rows);
  plan.b_resident = cols == p;
  // A chunk is --chunk-size of output (larger chunks are larger GEMMs, which run closer to the
  // GPU's peak), and its two buffers fit a quarter of the room.
  plan.chunk_tiles = std::max<std::int64_t>(
      1, std::min(problem.chunk_bytes / problem.record_bytes, problem.room / 4 / (2 * problem.record_bytes)));
  plan.chunk_rows = dense_chunk_rows(plan, row_ptr);
  // Row tiles pay only where B is expanded again a column tile: where B stays resident nothing
  // is expanded twice, and a row tile's GEMMs would all run before its chunks' gathers and
  // copy-backs instead of beside them (each chunk is then a row tile of its own).
  plan.row_tile_chunks = dense_row_tiles(plan.chunk_rows, plan.b_resident ? 0 : plan.max_rows_per_tile);
  for (std::size_t t = 0; t + 1 < plan.row_tile_chunks.size(); ++t)
    plan.row_tile_rows_max = std::max(plan.row_tile_rows_max, plan.chunk_rows[plan.row_tile_chunks[t + 1]] -
                                                                  plan.chunk_rows[plan.row_tile_chunks[t]]);
  plan.workspace = dense_workspace(encoding, n, plan.k_pitch, plan.k_pieces, std::int64_t{plan.row_tile_rows_max} * m,
                                   tile_cols_max, plan.col_tiles);
  return plan;
}

std::int64_t WarmUpProduct::bytes() const {
  const std::int64_t element = float64 ? 8 : 1, product = float64 ? 8 : 4;
  return element * (std::int64_t{rows} + cols) * k + product * std::int64_t{rows} * cols;
}

WarmUpProduct warm_up_product(std::int64_t n, DenseEncoding encoding, std::int64_t free_bytes, std::int64_t budget) {
  WarmUpProduct product;
  product.float64 = encoding == DenseEncoding::float64;
  const std::int64_t k = product.float64 ? std::min(n, kWarmUpFloat64K) : std::min(pad_to_planes(n), kWarmUpMaxK);
  const std::int64_t side = product.float64 ? std::min(n, kWarmUpSide) : std::min(pad_to_planes(n), kWarmUpSide);
  if (k <= 0 || side <= 0) return {};
  product.rows = product.cols = static_cast<std::int32_t>(side);
  product.k = static_cast<std::int32_t>(k);
  const std::int64_t limit = (budget > 0 ? std::min(budget, free_bytes) : free_bytes) / kWarmUpShare;
  if (product.bytes() > limit) return {};
  return product;
}

std::vector<std::int32_t> dense_row_tiles(const std::vector<std::int32_t>& chunk_rows, std::int32_t max_rows) {
  const auto chunks = static_cast<std::int32_t>(chunk_rows.size()) - 1;
  std::vector<std::int32_t> first;
  for (std::int32_t c = 0; c < chunks;) {
    std::int32_t c1 = c + 1;
    while (c1 < chunks && chunk_rows[c1 + 1] - chunk_rows[c] <= max_rows) ++c1;
    first.push_back(c);
    c = c1;
  }
  first.push_back(std::max(0, chunks));
  return first;
}

std::vector<std::int32_t> dense_chunk_rows(const DensePlan& plan, const std::vector<std::int64_t>& row_ptr) {
  const auto rows = static_cast<std::int32_t>(row_ptr.size()) - 1;
  std::vector<std::int32_t> first;
  for (std::int32_t r = 0; r < rows;) {
    std::int32_t r1 = r + 1;
    while (r1 < rows && r1 - r < plan.max_rows_per_tile && row_ptr[r1 + 1] - row_ptr[r] <= plan.chunk_tiles) ++r1;
    first.push_back(r);
    r = r1;
  }
  first.push_back(std::max(0, rows));
  return first;
}

}  // namespace blockmm::kernels::cuda
