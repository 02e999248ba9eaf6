// The numeric kernel: one thread block per work unit, a run of up to TILES output tiles (i, j)
// of one block-row i, so that a thread block has 128 threads even for m = 1, 2, 4. Threads
// that share a tile split its rows. Each thread intersects A's row i with B's column j by two
// pointers, collecting matches in batches so that the multiply-adds run convergent across the
// warp, accumulates in uint64 registers, and writes its saturated rows straight into the
// tile's output record: offsets are fixed by the (exact) symbolic phase, so nothing needs
// compacting afterwards. A row far longer than the column it meets (or the reverse) is searched
// instead of walked, so skewed rows cost their tiles little (for_each_match).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/sparse_plan.hpp"
#include "kernels/cuda/tile_params.hpp"

namespace blockmm::kernels::cuda {

constexpr int kMatchBatch = 8;

// Work units of a pattern on the device: row r's tiles [row_ptr[r], row_ptr[r + 1]) in runs of
// at most tiles_per_unit, the first of them unit first_unit[r] (an exclusive sum of the counts).
__global__ void row_unit_counts(const std::int64_t* row_ptr, std::int32_t rows, int tiles_per_unit,
                                std::int64_t* counts) {
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    counts[r] = (row_ptr[r + 1] - row_ptr[r] + tiles_per_unit - 1) / tiles_per_unit;
}

// One warp a row (a skewed row has thousands of units).
__global__ void fill_work_units(const std::int64_t* row_ptr, const std::int64_t* first_unit, std::int32_t rows,
                                int tiles_per_unit, WorkUnit* units) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const std::int64_t begin = row_ptr[r];
    const std::int64_t end = row_ptr[r + 1];
    for (std::int64_t u = lane; begin + u * tiles_per_unit < end; u += 32) {
      const std::int64_t first = begin + u * tiles_per_unit;
      const std::int64_t left = end - first;
      units[first_unit[r] + u] = {first, static_cast<std::int32_t>(r),
                                  static_cast<std::int32_t>(left < tiles_per_unit ? left : tiles_per_unit)};
    }
  }
}

namespace detail {

__device__ __forceinline__ std::uint32_t saturate(std::uint64_t x) {
  return x > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(x);
}

// Loads M consecutive uint16 (aligned to M * 2 bytes for power-of-two M) into registers.
template <int M>
__device__ __forceinline__ void load_row(const std::uint16_t* src, std::uint32_t (&dst)[M]) {
  if constexpr (M % 8 == 0) {
#pragma unroll
    for (int v = 0; v < M / 8; ++v) {
      const uint4 x = __ldg(reinterpret_cast<const uint4*>(src) + v);
      const std::uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        dst[v * 8 + 2 * h] = w[h] & 0xFFFFu;
        dst[v * 8 + 2 * h + 1] = w[h] >> 16;
      }
    }
  } else if constexpr (M == 4) {
    const uint2 x = __ldg(reinterpret_cast<const uint2*>(src));
    dst[0] = x.x & 0xFFFFu;
    dst[1] = x.x >> 16;
    dst[2] = x.y & 0xFFFFu;
    dst[3] = x.y >> 16;
  } else if constexpr (M == 2) {
    const unsigned int x = __ldg(reinterpret_cast<const unsigned int*>(src));
    dst[0] = x & 0xFFFFu;
    dst[1] = x >> 16;
  } else {
#pragma unroll
    for (int c = 0; c < M; ++c) dst[c] = __ldg(src + c);
  }
}

// acc[r][c] += sum_l a[r][l] * b[l][c] for this thread's RPT rows of the A block.
template <int M, int RPT>
__device__ __forceinline__ void block_mac(std::uint64_t (&acc)[RPT][M], const std::uint16_t* a_rows,
                                          const std::uint16_t* b) {
  std::uint32_t a[RPT][M];
#pragma unroll
  for (int r = 0; r < RPT; ++r) load_row<M>(a_rows + r * M, a[r]);
#pragma unroll
  for (int l = 0; l < M; ++l) {
    std::uint32_t brow[M];
    load_row<M>(b + l * M, brow);
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < M; ++c) acc[r][c] += static_cast<std::uint64_t>(a[r][l]) * brow[c];  // mad.wide.u32
  }
}

// First position in [lo, hi) of the ascending `keys` whose key is >= key (hi if none).
__device__ __forceinline__ std::int32_t lower_bound(const std::int32_t* keys, std::int32_t lo, std::int32_t hi,
                                                    std::int32_t key) {
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (__ldg(keys + mid) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// One list this many times longer than the other is searched, not walked: a power-law A row
// of 700 000 blocks meets B columns of 10, and walking both costs every tile of that row the
// whole row (a serialisation that leaves such skewed products far behind cuSPARSE); searching
// costs 10 x 20 steps.
constexpr std::int32_t kSearchRatio = 16;

// Intersects A's row with B's column, handing each batch of up to kMatchBatch matches (A block,
// B block; `count` of them) to `consume_batch` (any order: the sums are exact integers). Two
// pointers when the lists are of similar length, with branch-free steps that keep the warp
// together; else each entry of the short list is looked up in the long one (the long one's tail
// only: both ascend).
template <typename ConsumeBatch>
__device__ __forceinline__ void for_each_match_batch(const TileParams& p, std::int32_t pa, std::int32_t ea,
                                                     std::int32_t pb, std::int32_t eb, ConsumeBatch&& consume_batch) {
  const std::int32_t a_length = ea - pa;
  const std::int32_t b_length = eb - pb;
  const int mode = a_length > kSearchRatio * b_length ? 1 : (b_length > kSearchRatio * a_length ? 2 : 0);
  while (true) {
    std::int32_t ma[kMatchBatch];
    std::int32_t mb[kMatchBatch];
    int count = 0;
    auto add = [&](std::int32_t a_at, std::int32_t b_block) {
#pragma unroll
      for (int q = 0; q < kMatchBatch; ++q)
        if (q == count) {
          ma[q] = a_at;
          mb[q] = b_block;
        }
      ++count;
    };
    if (mode == 1) {  // search A's long row for each block of B's column
      while (count < kMatchBatch && pb < eb && pa < ea) {
        const std::int32_t kb = __ldg(p.b_csc_row + pb);
        pa = lower_bound(p.a_col, pa, ea, kb);
        if (pa < ea && __ldg(p.a_col + pa) == kb) add(pa, __ldg(p.b_csc_block + pb));
        ++pb;
      }
    } else if (mode == 2) {  // search B's long column for each block of A's row
      while (count < kMatchBatch && pa < ea && pb < eb) {
        const std::int32_t ka = __ldg(p.a_col + pa);
        pb = lower_bound(p.b_csc_row, pb, eb, ka);
        if (pb < eb && __ldg(p.b_csc_row + pb) == ka) add(pa, __ldg(p.b_csc_block + pb));
        ++pa;
      }
    } else {
      while (count < kMatchBatch && pa < ea && pb < eb) {
        const std::int32_t ka = __ldg(p.a_col + pa);
        const std::int32_t kb = __ldg(p.b_csc_row + pb);
        if (ka == kb) add(pa, __ldg(p.b_csc_block + pb));
        pa += ka <= kb;
        pb += kb <= ka;
      }
    }
    consume_batch(ma, mb, count);
    if (count < kMatchBatch) return;
  }
}

// The same, handing each match to `consume`.
template <typename Consume>
__device__ __forceinline__ void for_each_match(const TileParams& p, std::int32_t pa, std::int32_t ea,
                                               std::int32_t pb, std::int32_t eb, Consume&& consume) {
  for_each_match_batch(p, pa, ea, pb, eb,
                       [&](const std::int32_t (&ma)[kMatchBatch], const std::int32_t (&mb)[kMatchBatch], int count) {
#pragma unroll
                         for (int q = 0; q < kMatchBatch; ++q)
                           if (q < count) consume(ma[q], mb[q]);
                       });
}

__device__ __forceinline__ void store_index(std::byte* record, std::int32_t i, std::int32_t j) {
  reinterpret_cast<std::int32_t*>(record)[0] = i;
  reinterpret_cast<std::int32_t*>(record)[1] = j;
}

}  // namespace detail

template <int M>
__global__ void __launch_bounds__(kThreadsPerUnit) tile_kernel_fixed(TileParams p) {
  using Shape = FixedShape<M>;
  constexpr int RPT = Shape::rows_per_thread;
  constexpr std::int64_t kStride = 8 + 4 * M * M;
  __shared__ unsigned int nonzero[kThreadsPerUnit];
  const WorkUnit unit = p.units[blockIdx.x];
  const int local = threadIdx.x / Shape::threads_per_tile;
  const int group = threadIdx.x % Shape::threads_per_tile;
  nonzero[threadIdx.x] = 0;
  __syncthreads();
  const bool active = local < unit.tiles;
  std::int64_t tile = 0;
  std::int32_t j = 0;
  std::uint64_t acc[RPT][M];
#pragma unroll
  for (int r = 0; r < RPT; ++r)
#pragma unroll
    for (int c = 0; c < M; ++c) acc[r][c] = 0;
  if (active) {
    tile = unit.first_tile + local;
    j = p.tile_col[tile - p.chunk_first_tile];
    const std::int32_t row = unit.row;
    const std::uint16_t* a_base = p.a_values + group * RPT * M;
    detail::for_each_match(p, p.a_row_ptr[row], p.a_row_ptr[row + 1], p.b_col_ptr[j], p.b_col_ptr[j + 1],
                           [&](std::int32_t a_block, std::int32_t b_block) {
                             detail::block_mac<M, RPT>(acc, a_base + static_cast<std::size_t>(a_block) * M * M,
                                                       p.b_values + static_cast<std::size_t>(b_block) * M * M);
                           });
    std::byte* record = p.out + (tile - p.chunk_first_tile) * kStride;
    if (group == 0) detail::store_index(record, p.a_row_begin + row, j);
    std::uint32_t* values = reinterpret_cast<std::uint32_t*>(record + 8) + group * RPT * M;
    unsigned int any = 0;
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < M; ++c) {
        values[r * M + c] = detail::saturate(acc[r][c]);
        any |= acc[r][c] != 0;
      }
    if (any) atomicOr(&nonzero[local], 1u);
  }
  __syncthreads();
  if (active && group == 0 && nonzero[local] == 0) atomicAdd(p.zero_tiles, 1u);
}

__global__ void __launch_bounds__(kThreadsPerUnit) tile_kernel_generic(TileParams p, int tiles_per_unit) {
  __shared__ unsigned int nonzero[kThreadsPerUnit];
  const int m = p.m;
  const int chunks = (m + kGenericColumns - 1) / kGenericColumns;
  const int per_tile = m * chunks;
  const std::int64_t stride = 8 + 4 * static_cast<std::int64_t>(m) * m;
  const std::int64_t mm = static_cast<std::int64_t>(m) * m;
  const WorkUnit unit = p.units[blockIdx.x];
  for (int t = threadIdx.x; t < kThreadsPerUnit; t += blockDim.x) nonzero[t] = 0;
  __syncthreads();
  // Work items (tile, row, column chunk); more items than threads when m > 11.
  for (int item = threadIdx.x; item < tiles_per_unit * per_tile; item += blockDim.x) {
    const int local = item / per_tile;
    const int r = (item % per_tile) / chunks;
    const int c0 = (item % chunks) * kGenericColumns;
    if (local >= unit.tiles) continue;
    const std::int64_t tile = unit.first_tile + local;
    const std::int32_t j = p.tile_col[tile - p.chunk_first_tile];
    std::uint64_t acc[kGenericColumns];
#pragma unroll
    for (int c = 0; c < kGenericColumns; ++c) acc[c] = 0;
    detail::for_each_match(p, p.a_row_ptr[unit.row], p.a_row_ptr[unit.row + 1], p.b_col_ptr[j], p.b_col_ptr[j + 1],
                           [&](std::int32_t a_block, std::int32_t b_block) {
                             const std::uint16_t* a = p.a_values + a_block * mm + static_cast<std::int64_t>(r) * m;
                             const std::uint16_t* b = p.b_values + b_block * mm + c0;
                             for (int l = 0; l < m; ++l) {
                               const std::uint32_t av = __ldg(a + l);
#pragma unroll
                               for (int c = 0; c < kGenericColumns; ++c)
                                 if (c0 + c < m) acc[c] += static_cast<std::uint64_t>(av) * __ldg(b + l * m + c);
                             }
                           });
    std::byte* record = p.out + (tile - p.chunk_first_tile) * stride;
    if (r == 0 && c0 == 0) detail::store_index(record, p.a_row_begin + unit.row, j);
    std::uint32_t* values = reinterpret_cast<std::uint32_t*>(record + 8) + static_cast<std::int64_t>(r) * m + c0;
    unsigned int any = 0;
#pragma unroll
    for (int c = 0; c < kGenericColumns; ++c)
      if (c0 + c < m) {
        values[c] = detail::saturate(acc[c]);
        any |= acc[c] != 0;
      }
    if (any) atomicOr(&nonzero[local], 1u);
  }
  __syncthreads();
  for (int local = threadIdx.x; local < unit.tiles; local += blockDim.x)
    if (nonzero[local] == 0) atomicAdd(p.zero_tiles, 1u);
}

}  // namespace blockmm::kernels::cuda
