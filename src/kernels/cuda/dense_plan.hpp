// The dense tensor-core path's plan, on the host only (in the spirit of CUTLASS's
// can_implement and workspace size; whether the path pays is path_choice.hpp's): which exact
// encoding, how the inner dimension cuts into exact int8 pieces, how large the
// A and B tiles are under the memory budget, and how output rows group into chunks. Pure C++,
// compiled in every build, so that its unit tests run where there is no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/budget_error.hpp"

namespace blockmm::kernels::cuda {

// The dense path's largest order: float64 stays exact below it, and the int8 planes' sums over
// a whole plane vector (at most 128 n in magnitude) stay inside int32.
constexpr std::int64_t kDenseMaxOrder = std::int64_t{1} << 21;
constexpr std::int64_t kPlanePad = 16;  // int8 GEMM dimensions (and K pieces): multiples of 16
// The longest K piece whose int32 sums are exact for every int8 encoding: 131056 * 2^14 (the
// largest product of two plane entries, 128 * 128 for the offset byte planes) < 2^31. Narrower
// values allow longer pieces (int8_piece_limit).
constexpr std::int64_t kInt8MaxPiece = 131056;
// A tiles at most this many rows: cuBLAS's GEMMs have M = 16384 then (the byte planes stack
// two planes of rows, and float64 is at full speed well before).
constexpr std::int64_t kMaxDenseTileRows = 8192;
constexpr std::int64_t kMaxNarrowTileRows = 16384;  // one plane a GEMM: int8_narrow, int8_split

constexpr std::int64_t pad_to_planes(std::int64_t x) { return (x + kPlanePad - 1) / kPlanePad * kPlanePad; }

// Exact encodings of the dense tiles, fewest tensor-core products first (dense_kernels.cuh):
// - int8_narrow: values up to kNarrowMax are int8 as they are: one product.
// - int8_split: values up to kSplitMax (4222) split into hi = u >> 6 and lo = u & 63, with a
//   third plane hi + lo (each at most 127, no offset): three products (Karatsuba), the cross term
//   (hi + lo)(hi' + lo') - hi hi' - lo lo'.
// - int8_planes: any uint16 as two bytes offset by -128: one GEMM of the stacked planes, four
//   products (its quadrants), the offsets taken back out through the planes' sums.
// - float64: n up to kDenseMaxOrder, one product in float64.
// The int8 forms' GEMMs sum in int32: every product of two plane entries is at most 2^14 in
// magnitude, so a K piece of up to kInt8MaxPiece terms is exact; a longer inner dimension is
// cut into pieces whose int32 products are summed in int64 (DensePlan::k_pieces).
enum class DenseEncoding { int8_narrow, int8_split, int8_planes, float64 };
constexpr std::uint32_t kNarrowMax = 127;
constexpr int kSplitShift = 6;
// The largest u such that every value up to it has hi + lo <= 127 (4223 = 65 * 64 + 63 is the
// first that does not).
constexpr std::uint32_t kSplitMax = 65 * 64 + 62;

// Plane vectors an A row or a B column takes, and int32 products an output element takes.
int planes_of(DenseEncoding encoding);
int products_of(DenseEncoding encoding);
std::int64_t max_tile_rows(DenseEncoding encoding);
const char* describe(DenseEncoding encoding);  // for the run's device line

// What the plan depends on: the panel and the device memory left for the numeric phase.
struct DenseProblem {
  std::int64_t n = 0;               // matrix order
  std::int32_t m = 0;               // block order
  std::int32_t rows = 0;            // block-rows of the panel
  std::int64_t tiles = 0;           // output tiles of the panel
  std::int64_t block_products = 0;  // of the panel
  std::int64_t room = 0;            // device bytes for the numeric phase's buffers
  std::int64_t chunk_bytes = 0;     // --chunk-size
  std::int64_t record_bytes = 0;    // output record size
  // The largest value of both operands' blocks (it bounds the plane entries and so the K
  // pieces); 0 where unknown, which assumes the widest.
  std::uint32_t largest_value = 0;
};

// The encoding for the largest value of both operands' blocks: float64 only where the choices
// ask for it (any n the dense path takes has exact int8 pieces).
DenseEncoding dense_encoding(std::int64_t n, std::uint32_t largest_value, const CudaChoices& choices);

// The longest K piece (a multiple of kPlanePad) whose int32 sums are exact for `encoding`'s
// planes of values up to `largest_value` (0: unknown, the widest planes): (2^31 - 1) over the
// largest product of two plane entries. int8_narrow: u^2; int8_split: (hi + lo)^2 with
// hi + lo <= (v >> 6) + min(v, 63); int8_planes: 128^2 whatever the values.
std::int64_t int8_piece_limit(DenseEncoding encoding, std::uint32_t largest_value);

// A K piece: inner entries [begin, begin + length) of the plane vectors.
struct KPiece {
  std::int64_t begin = 0, length = 0;
};

// Device buffers of the dense path for A tiles of `tile_rows` rows and B tiles of `tile_cols`
// columns (of elements), `col_tiles` of them across B: float64 tiles and their product, or int8
// plane vectors (each k_pitch long: the planes of the A tile's padded rows one after the other,
// likewise B's columns), their int32 products (the byte planes' one GEMM of four quadrants, or
// one product a plane) and the offset byte planes' sums. The products (and B's sums) cover every
// B tile side by side, so that the A tile is multiplied by all of B before its chunks are
// gathered; the set the encoding does not use is empty. Counts of elements.
struct DenseWorkspace {
  std::int64_t a_float64 = 0, b_float64 = 0, c_float64 = 0;  // double
  std::int64_t a_planes = 0, b_planes = 0;                   // int8
  std::int64_t products = 0;                                 // int32: one K piece's
  std::int64_t a_sums = 0, b_sums = 0;                       // int32
  std::int64_t piece_sums = 0;  // int64: the K pieces' products summed, where there are several
  std::int64_t bytes() const;
};
DenseWorkspace dense_workspace(DenseEncoding encoding, std::int64_t n, std::int64_t k_pitch, std::int32_t k_pieces,
                               std::int64_t tile_rows, std::int64_t tile_cols, std::int32_t col_tiles);

// The product of one B tile inside the workspace's products: tile jt of a GEMM with `rows`
// (padded) rows starts at jt * product_tile_stride (elements), whatever the tile's own width.
std::int64_t product_tile_stride(DenseEncoding encoding, std::int64_t rows, std::int64_t tile_cols);

struct DensePlan {
  DenseEncoding encoding = DenseEncoding::int8_planes;
  std::int32_t cols_per_tile = 0;      // block-columns of a B tile
  std::int32_t col_tiles = 0;          // B tiles across the matrix
  std::int32_t max_rows_per_tile = 0;  // block-rows of an A tile
  bool b_resident = false;             // B's whole width in one tile, expanded once
  std::int64_t chunk_tiles = 0;        // output tiles a chunk may hold
  std::int64_t k_pitch = 0;            // a plane vector's length (n, padded for int8)
  // The inner dimension in pieces of k_piece entries (the last one shorter), each an int8 GEMM
  // with exact int32 sums; one piece of n for float64.
  std::int64_t k_piece = 0;
  std::int32_t k_pieces = 1;
  // Chunks of whole block-rows (dense_chunk_rows): the first panel row of each, then `rows`.
  std::vector<std::int32_t> chunk_rows;
  // Row tiles: runs of consecutive chunks of at most max_rows_per_tile rows together, each an A
  // tile multiplied by every B tile once, its chunks then gathered from that product (B is
  // expanded once a row tile and column tile, not once a chunk: a chunk is --chunk-size of
  // output, a few dozen rows where B is wide); where B stays resident, each chunk alone. The
  // first chunk of each, then the chunks' count.
  std::vector<std::int32_t> row_tile_chunks;
  std::int32_t row_tile_rows_max = 0;  // block-rows of the largest row tile: the A tile's height
  // What the path allocates: A tiles as large as the largest row tile (at most
  // max_rows_per_tile block-rows: fewer where the output, not the room, limits the rows, so that
  // the products are not sized for rows no chunk holds) and B tiles of cols_per_tile block-columns.
  DenseWorkspace workspace;
};

// Piece `piece` (0 .. k_pieces - 1) of the plan's inner dimension.
KPiece k_piece_at(const DensePlan& plan, std::int32_t piece);

// Throws ResourceError naming the budget when the room cannot hold the smallest tiles.
// `row_ptr`: the panel's output tiles by block-row (rows + 1 entries), which the chunks cut.
DensePlan plan_dense(const DenseProblem& problem, DenseEncoding encoding, const std::vector<std::int64_t>& row_ptr);

// One product issued before the numeric phase so that cuBLAS has chosen and loaded the kernel
// of the dense path's GEMMs by then (the first int8 GEMM of a shape family costs host time while
// the GPU waits behind it; the product must be large, since a small one does not load the kernel
// that large GEMMs use). Its operands are uninitialised scratch; the product is discarded. Empty
// (rows == 0) where it would take more than kWarmUpShare of the device memory free, or of an
// explicit budget.
struct WarmUpProduct {
  bool float64 = false;
  std::int32_t rows = 0, cols = 0, k = 0;  // the GEMM's M, N and K
  std::int64_t bytes() const;              // device memory of its A, B and C
};
constexpr std::int64_t kWarmUpSide = 2048;     // M and N where the panels are at least this large
constexpr std::int64_t kWarmUpMaxK = 32768;    // int8: the dense path's K up to this
constexpr std::int64_t kWarmUpFloat64K = 4096; // float64: K (its kernels vary less with shape)
constexpr std::int64_t kWarmUpShare = 16;      // at most 1/16 of the memory free or budgeted
WarmUpProduct warm_up_product(std::int64_t n, DenseEncoding encoding, std::int64_t free_bytes, std::int64_t budget);

// Chunks of whole block-rows: at most plan.chunk_tiles tiles (or one row) and
// plan.max_rows_per_tile rows each. Returns the first panel row of each chunk, then `rows`.
std::vector<std::int32_t> dense_chunk_rows(const DensePlan& plan, const std::vector<std::int64_t>& row_ptr);

// Consecutive chunks (`chunk_rows`, as dense_chunk_rows gives them) grouped into row tiles of
// at most `max_rows` rows (a chunk alone where it is longer). Returns the first chunk of each
// row tile, then the chunks' count.
std::vector<std::int32_t> dense_row_tiles(const std::vector<std::int32_t>& chunk_rows, std::int32_t max_rows);

}  // namespace blockmm::kernels::cuda
