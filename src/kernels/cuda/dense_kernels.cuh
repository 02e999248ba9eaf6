// Kernels of the dense-tile path: scatter block panels into dense tiles for cuBLAS, and gather
// the product back into output records. The exact encodings (dense_plan.hpp chooses):
//
// - int8 narrow planes, for operands whose largest value is small: values
//   up to 127 are one int8 plane as they are, one product; values up to 4222 are split into
//   hi = u >> 6 and lo = u & 63 with a third plane s = hi + lo (at most 127), and
//   three products give A B = 2^12 hh + 2^6 (ss - hh - ll) + ll (Karatsuba). No offsets: zero is
//   zero, and every product of two planes' entries is at most 127^2 < 2^14, as below.
// - int8 byte planes: every uint16 value u is split into its bytes,
//   each stored offset by -128 as int8 (hi = (u >> 8) - 128, lo = (u & 255) - 128), so that one
//   int8 GEMM with int32 accumulation (tensor cores) multiplies the stacked planes [A_hi; A_lo]
//   by [B_hi, B_lo] and yields all four byte products. For bytes x = X' + 128, y = Y' + 128,
//   sum_k x y = sum_k X'Y' + 128 (sum_k X' + sum_k Y') + 16384 n, where sum_k X'Y' is the GEMM
//   and the plane sums (at most 2^28 in magnitude for n < 2^21) come from vector_sums. Then
//   A B = 2^16 hh + 2^8 (hl + lh) + ll, below 2^53 for n < 2^21: int64 exact.
// - float64 (n < 2^21): each product of two uint16 is below 2^32 and every sum of at most n of
//   them is below 2^53.
//
// The int8 GEMMs sum in int32, exact over a K piece of up to int8_piece_limit terms (131056 for
// the byte planes: |X'Y'| <= 2^14). A longer inner dimension is multiplied piece by piece, the
// same offset into both operands' plane vectors with their full pitch as leading dimension; each
// piece's products but the last are added into int64 sums (add_piece: a pass of 20 bytes an
// element against the GEMM's K-piece multiply-adds an element, a few percent), and the gather
// reads the last piece's products beside those sums (PieceSums), so the last piece costs no pass.
// The byte planes' offset corrections are linear in K: one correction over the whole vectors,
// applied once in the gather.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/sparse_plan.hpp"

namespace blockmm::kernels::cuda {

// The last index r in [lo, hi) with ptr[r] <= x: the row (or column) that holds entry x of a
// compressed index whose entries [ptr[lo], ptr[hi]) include x. Empty rows share a ptr value;
// "last" skips past them.
__device__ __forceinline__ std::int32_t owner_of_entry(const std::int32_t* ptr, std::int32_t lo, std::int32_t hi,
                                                        std::int64_t x) {
  while (hi - lo > 1) {
    const std::int32_t mid = (lo + hi) / 2;
    if (ptr[mid] <= x) lo = mid; else hi = mid;
  }
  return lo;
}

// Where the values of the dense A tile or B tile go. A tile type stores a run of `count` values
// (first[x * step]) from (r, c) along the direction its entries run contiguous: down a column
// where kRowsContiguous ((r, c) and (r + 1, c) are neighbours), else along a row. The scatter
// kernels hand each thread one such run, a line of a block.
// float64, column-major with leading dimension `ld`.
struct Float64Tile {
  static constexpr bool kRowsContiguous = true;
  double* dense;
  std::int64_t ld;
  __device__ void store_run(std::int64_t r, std::int64_t c, const std::uint16_t* first, int step, int count) const {
    for (int x = 0; x < count; ++x) dense[r + x + c * ld] = first[x * step];
  }
};

// int8 plane vectors (a row of the A tile, a column of the B tile), each k_pitch contiguous
// entries (the padded n), plane q's vectors from q * plane_vectors; A's vectors are its rows (a
// K x M column-major operand for a transposed GEMM), B's its columns. A run of 4 or 8 entries
// (m = 4, 8: always aligned, as k_pitch and the run's start are multiples of m) is one store a
// plane. `Encoding` gives kPlanes and plane q's int8 of a value.
template <bool kVectorsAreColumns, typename Encoding>
struct Int8PlaneVectors {
  static constexpr bool kRowsContiguous = kVectorsAreColumns;
  std::int8_t* planes;
  std::int64_t k_pitch, plane_vectors;
  __device__ void store_run(std::int64_t r, std::int64_t c, const std::uint16_t* first, int step, int count) const {
    const std::int64_t vector = kVectorsAreColumns ? c : r;
    const std::int64_t k0 = kVectorsAreColumns ? r : c;
    if (count == 8 || count == 4) {
      std::uint16_t u[8];
#pragma unroll
      for (int x = 0; x < 8; ++x) u[x] = x < count ? first[x * step] : 0;
#pragma unroll
      for (int q = 0; q < Encoding::kPlanes; ++q) {
        std::int8_t* out = planes + (q * plane_vectors + vector) * k_pitch + k0;
        unsigned long long word = 0;
#pragma unroll
        for (int x = 0; x < 8; ++x)
          word |= static_cast<unsigned long long>(static_cast<std::uint8_t>(Encoding::plane(u[x], q))) << (8 * x);
        if (count == 8) *reinterpret_cast<unsigned long long*>(out) = word;
        else *reinterpret_cast<unsigned int*>(out) = static_cast<unsigned int>(word);
      }
      return;
    }
    for (int x = 0; x < count; ++x) {
      const std::uint16_t u = first[x * step];
#pragma unroll
      for (int q = 0; q < Encoding::kPlanes; ++q)
        planes[(q * plane_vectors + vector) * k_pitch + k0 + x] = Encoding::plane(u, q);
    }
  }
};

// The byte planes: hi = (u >> 8) - 128, lo = (u & 255) - 128.
struct BytePlanesEncoding {
  static constexpr int kPlanes = 2;
  __device__ static std::int8_t plane(std::uint16_t u, int q) {
    return static_cast<std::int8_t>(static_cast<int>(q == 0 ? u >> 8 : u & 255) - 128);
  }
};
// Narrow planes, no offset (zero is 0): one plane, u itself (u <= kNarrowMax); or three, hi =
// u >> 6, lo = u & 63 and hi + lo (u <= kSplitMax).
struct NarrowPlaneEncoding {
  static constexpr int kPlanes = 1;
  __device__ static std::int8_t plane(std::uint16_t u, int) { return static_cast<std::int8_t>(u); }
};
struct SplitPlanesEncoding {
  static constexpr int kPlanes = 3;
  __device__ static std::int8_t plane(std::uint16_t u, int q) {
    const int hi = u >> kSplitShift, lo = u & ((1 << kSplitShift) - 1);
    return static_cast<std::int8_t>(q == 0 ? hi : q == 1 ? lo : hi + lo);
  }
};

// Calls scatter(tile) with the int8 plane vectors of `encoding` (host side: picks the kernels'
// instantiation). kVectorsAreColumns: B's tile, else A's.
template <bool kVectorsAreColumns, typename Scatter>
void with_plane_vectors(DenseEncoding encoding, std::int8_t* planes, std::int64_t k_pitch, std::int64_t plane_vectors,
                        Scatter&& scatter) {
  switch (encoding) {
    case DenseEncoding::int8_narrow:
      scatter(Int8PlaneVectors<kVectorsAreColumns, NarrowPlaneEncoding>{planes, k_pitch, plane_vectors});
      break;
    case DenseEncoding::int8_split:
      scatter(Int8PlaneVectors<kVectorsAreColumns, SplitPlanesEncoding>{planes, k_pitch, plane_vectors});
      break;
    default: scatter(Int8PlaneVectors<kVectorsAreColumns, BytePlanesEncoding>{planes, k_pitch, plane_vectors});
  }
}

// *largest = max(*largest, the largest of values[0, count)); one atomic a thread block (launch
// a bounded grid: one address takes every atomic).
__global__ void largest_value(const std::uint16_t* values, std::int64_t count, unsigned int* largest) {
  __shared__ unsigned int warp_best[32];
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned int best = 0;
  // Eight values a load where the array is 16-byte aligned (device allocations are), then the tail.
  const bool aligned = reinterpret_cast<std::uintptr_t>(values) % 16 == 0;
  const std::int64_t vectors = aligned ? count / 8 : 0;
  const uint4* packed = reinterpret_cast<const uint4*>(values);
  for (std::int64_t v = first; v < vectors; v += stride) {
    const uint4 x = packed[v];
    const unsigned int pairs = __vmaxu2(__vmaxu2(x.x, x.y), __vmaxu2(x.z, x.w));
    best = max(best, max(pairs & 0xFFFFu, pairs >> 16));
  }
  for (std::int64_t v = vectors * 8 + first; v < count; v += stride) best = max(best, static_cast<unsigned int>(values[v]));
  for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_down_sync(0xFFFFFFFFu, best, offset));
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned int w = 1; w < (blockDim.x + 31) / 32; ++w) best = max(best, warp_best[w]);
    if (best != 0) atomicMax(largest, best);
  }
}

// sums[v] = the sum of plane vector v's entries; one thread block a vector.
__global__ void vector_sums(const std::int8_t* planes, std::int64_t k_pitch, std::int32_t* sums) {
  __shared__ std::int32_t partial[256];
  const std::int8_t* vector = planes + blockIdx.x * k_pitch;
  std::int32_t sum = 0;
  for (std::int64_t k = threadIdx.x; k < k_pitch; k += blockDim.x) sum += vector[k];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// Dense A tile [rows x n]: A's blocks of panel rows [row0, row0 + rows / m).
// Blocks of those rows are contiguous in CSR order: [first_block, first_block + blocks). One
// thread a line of a block (a row, or a column where the tile's rows run contiguous), so that a
// block's owner is searched for m times, not m^2, and each thread's stores are one run.
template <typename Tile>
__global__ void scatter_a_tile(const std::int32_t* a_row_ptr, const std::int32_t* a_col, const std::uint16_t* a_values,
                               std::int32_t m, std::int32_t row0, std::int32_t tile_rows, std::int32_t first_block,
                               std::int64_t blocks, Tile tile) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < blocks * m;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = first_block + t / m;
    const int line = static_cast<int>(t % m);
    const std::int32_t row = owner_of_entry(a_row_ptr, row0, row0 + tile_rows / m, b);
    const std::int64_t r0 = static_cast<std::int64_t>(row - row0) * m, c0 = static_cast<std::int64_t>(a_col[b]) * m;
    const std::uint16_t* block = a_values + b * mm;
    if (Tile::kRowsContiguous) tile.store_run(r0, c0 + line, block + line, m, m);  // column `line`
    else tile.store_run(r0 + line, c0, block + line * m, 1, m);                   // row `line`
  }
}

// Dense B tile [n x cols]: B's blocks of block-columns [col0, col0 + cols / m), which are
// contiguous in CSC order: entries [first_entry, first_entry + entries). One thread a line of a
// block, as above.
template <typename Tile>
__global__ void scatter_b_tile(const std::int32_t* b_col_ptr, const std::int32_t* b_csc_row,
                               const std::int32_t* b_csc_block, const std::uint16_t* b_values, std::int32_t m,
                               std::int32_t col0, std::int32_t tile_cols, std::int32_t first_entry,
                               std::int64_t entries, Tile tile) {
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < entries * m;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t entry = first_entry + t / m;
    const int line = static_cast<int>(t % m);
    const std::int32_t col = owner_of_entry(b_col_ptr, col0, col0 + tile_cols / m, entry);
    const std::int64_t r0 = static_cast<std::int64_t>(b_csc_row[entry]) * m, c0 = static_cast<std::int64_t>(col - col0) * m;
    const std::uint16_t* block = b_values + static_cast<std::int64_t>(b_csc_block[entry]) * mm;
    if (Tile::kRowsContiguous) tile.store_run(r0, c0 + line, block + line, m, m);
    else tile.store_run(r0 + line, c0, block + line * m, 1, m);
  }
}

// sums[x] = products[x] (first piece) or sums[x] += products[x], for x in [0, count): one K
// piece's int32 products into the int64 sums of the pieces so far.
__global__ void add_piece(const std::int32_t* products, std::int64_t count, bool first, std::int64_t* sums) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t start = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  // Four at a time where the arrays allow it (cudaMalloc'd, and counts of padded tiles: always).
  const bool vectors = count % 4 == 0 && reinterpret_cast<std::uintptr_t>(products) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(sums) % 16 == 0;
  if (vectors) {
    const int4* in = reinterpret_cast<const int4*>(products);
    longlong2* out = reinterpret_cast<longlong2*>(sums);
    for (std::int64_t v = start; v < count / 4; v += stride) {
      const int4 x = in[v];
      longlong2 lo = first ? make_longlong2(0, 0) : out[2 * v];
      longlong2 hi = first ? make_longlong2(0, 0) : out[2 * v + 1];
      lo.x += x.x;
      lo.y += x.y;
      hi.x += x.z;
      hi.y += x.w;
      out[2 * v] = lo;
      out[2 * v + 1] = hi;
    }
    return;
  }
  for (std::int64_t x = start; x < count; x += stride) sums[x] = (first ? 0 : sums[x]) + products[x];
}

// The product at `at` summed over the K pieces: the last piece's int32 products plus, where the
// inner dimension took several pieces, the int64 sums of those before it (same layout).
struct PieceSums {
  const std::int32_t* last;
  const std::int64_t* earlier;  // null: one piece
  __device__ std::int64_t operator()(std::int64_t at) const {
    return (earlier != nullptr ? earlier[at] : 0) + static_cast<std::int64_t>(last[at]);
  }
};

__device__ __forceinline__ std::uint32_t saturate_product(std::int64_t x) {
  return x >= 4294967295 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
}

// The saturated value of the dense product tile at (r, c).
struct Float64Product {
  const double* c_tile;  // column-major [ld x cols]
  std::int64_t ld;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const {
    const double x = c_tile[r + c * ld];
    return x >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
  }
};
struct Int8PlanesProduct {
  PieceSums c_tile;  // column-major [ld x 2 col_lo]: quadrants hi-hi, lo-hi (rows from row_lo), hi-lo, lo-lo
  std::int64_t ld, row_lo, col_lo;
  const std::int32_t* a_sums;  // per A plane row (lo rows from row_lo)
  const std::int32_t* b_sums;  // per B plane column (lo columns from col_lo)
  std::int64_t n;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const {
    const auto bytes = [&](std::int64_t ar, std::int64_t bc) {  // sum_k x y of one pair of planes
      return c_tile(ar + bc * ld) + 128 * (static_cast<std::int64_t>(a_sums[ar]) + b_sums[bc]) + 16384 * n;
    };
    const std::int64_t hh = bytes(r, c), hl = bytes(r, col_lo + c), lh = bytes(row_lo + r, c),
                       ll = bytes(row_lo + r, col_lo + c);
    return saturate_product((hh << 16) + ((hl + lh) << 8) + ll);
  }
};

// One plane: the product itself (above 2^32 only where K took several pieces).
struct NarrowPlaneProduct {
  PieceSums c_tile;  // column-major [ld x cols]
  std::int64_t ld;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const { return saturate_product(c_tile(r + c * ld)); }
};
// Split planes: the three products hh, ll, ss, each column-major [ld x cols], plane_elements apart.
struct SplitPlanesProduct {
  PieceSums c_tile;
  std::int64_t ld, plane_elements;
  __device__ std::uint32_t operator()(std::int64_t r, std::int64_t c) const {
    const std::int64_t at = r + c * ld;
    const std::int64_t hh = c_tile(at), ll = c_tile(at + plane_elements), ss = c_tile(at + 2 * plane_elements);
    return saturate_product((hh << (2 * kSplitShift)) + ((ss - hh - ll) << kSplitShift) + ll);
  }
};

// Output records of the units' tiles from the dense product tile (element (0, 0) = block
// (row0, col0)).
template <typename Product>
__global__ void gather_records(const WorkUnit* units, const std::int32_t* tile_col, std::int64_t chunk_first_tile,
                               Product product, std::int32_t row0, std::int32_t col0, std::int32_t a_row_begin,
                               std::int32_t m, std::byte* out, unsigned int* zero_tiles) {
  __shared__ unsigned int nonzero[kThreadsPerUnit];
  const WorkUnit unit = units[blockIdx.x];
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  const std::int64_t stride = 8 + 4 * mm;
  for (int t = threadIdx.x; t < kThreadsPerUnit; t += blockDim.x) nonzero[t] = 0;
  __syncthreads();
  for (std::int64_t v = threadIdx.x; v < unit.tiles * mm; v += blockDim.x) {
    const int local = static_cast<int>(v / mm);
    // Down the tile's columns: the products are column-major and read three or four times the
    // bytes that the records take.
    const int e = static_cast<int>(v % mm), er = e % m, ec = e / m;
    const std::int64_t tile = unit.first_tile + local;
    const std::int32_t j = tile_col[tile - chunk_first_tile];
    const std::int64_t r = static_cast<std::int64_t>(unit.row - row0) * m + er;
    const std::int64_t c = static_cast<std::int64_t>(j - col0) * m + ec;
    const std::uint32_t value = product(r, c);
    std::byte* record = out + (tile - chunk_first_tile) * stride;
    if (e == 0) {
      reinterpret_cast<std::int32_t*>(record)[0] = a_row_begin + unit.row;
      reinterpret_cast<std::int32_t*>(record)[1] = j;
    }
    reinterpret_cast<std::uint32_t*>(record + 8)[er * m + ec] = value;
    if (value != 0) atomicOr(&nonzero[local], 1u);
  }
  __syncthreads();
  for (int local = threadIdx.x; local < unit.tiles; local += blockDim.x)
    if (nonzero[local] == 0) atomicAdd(zero_tiles, 1u);
}

}  // namespace blockmm::kernels::cuda
