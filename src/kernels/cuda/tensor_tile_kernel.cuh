// The tensor-core block kernel for m = 8, 16, 32 (tensor_tile.hpp has the scheme and the
// host-tested lane logic): the same work units as the CUDA-core tile kernel (a run of output
// tiles of one block-row a thread block), each tile's block products found by matching A's row
// against B's column, multiplied as byte planes by int8 MMAs with int32 accumulators folded into
// uint64 sums, saturated into the tile's output record. Included by sparse_numeric.cu alone.
//
// Matching, per work unit (both exact; the order of the matches does not matter):
// - a bitmap of the A row's block columns in shared memory, with each word's rank (the A
//   blocks before it), so that each B column is scanned 32 entries at a time by one warp, a
//   ballot gathering the hits (no dependent loads, unlike a walk);
// - or, where the bitmap does not fit shared memory or does not pay (tensor_tile.hpp,
//   bitmap_pays: a very long A row against short columns), the CUDA-core kernel's two-pointer
//   walk with its search of a far longer list (tile_kernel.cuh, for_each_match), run by every
//   lane of a warp alike.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/sparse_plan.hpp"
#include "kernels/cuda/tensor_tile.hpp"
#include "kernels/cuda/tile_kernel.cuh"
#include "kernels/cuda/tile_params.hpp"

namespace blockmm::kernels::cuda {

// D += A B for one m16n8k32 MMA of unsigned bytes (sm_80 and later).
__device__ __forceinline__ void mma_u8(std::int32_t (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                       std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the plan never chooses this kernel below sm_80 (sparse_plan.hpp)
#endif
}

// B's blocks as byte planes (tensor_tile.hpp, b_planes_offset): one thread a run of 8 entries
// of a column.
template <int M>
__global__ void b_block_planes(const std::uint16_t* values, std::int64_t blocks, std::uint8_t* planes) {
  constexpr std::int64_t kRuns = std::int64_t{M} * (M / 8);  // (column, run) pairs of a block
  for (std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; item < blocks * kRuns;
       item += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t block = item / kRuns;
    const int col = static_cast<int>(item % kRuns) / (M / 8), run = static_cast<int>(item % kRuns) % (M / 8);
    const std::uint16_t* b = values + block * M * M;
    std::uint16_t v[8];
#pragma unroll
    for (int x = 0; x < 8; ++x) v[x] = b[(8 * run + x) * M + col];
    alignas(16) std::uint8_t out[16];
    tensor::b_planes_run(v, out);
    *reinterpret_cast<uint4*>(planes + block * 2 * M * M + tensor::b_planes_offset(M, col, run)) =
        *reinterpret_cast<const uint4*>(out);
  }
}

namespace detail {

// One K-step of a lane's tile: its operands, then the warp's MMAs on them.
template <int M>
__device__ __forceinline__ void tensor_step(tensor::LaneTile<M>& t, const std::uint16_t* a_values,
                                            const std::uint8_t* b_planes) {
  t.load(a_values, b_planes);
#pragma unroll
  for (int rg = 0; rg < tensor::LaneTile<M>::RG; ++rg)
#pragma unroll
    for (int cg = 0; cg < tensor::LaneTile<M>::CG; ++cg) {
      mma_u8(t.acc_hi[rg][cg], t.a[rg], t.b[cg][0], t.b[cg][1]);
      mma_u8(t.acc_lo[rg][cg], t.a[rg], t.b[cg][2], t.b[cg][3]);
    }
  t.stepped();
}

// bits[w]: the A row's block columns 32w .. 32w+31; rank[w]: its blocks before column 32w.
// Every thread of the block takes part (three barriers).
__device__ __forceinline__ void build_row_bitmap(const TileParams& p, std::int32_t a_begin, std::int32_t a_end,
                                                 std::int32_t words, std::uint32_t* bits, std::int32_t* rank) {
  __shared__ std::int32_t warp_sums[kThreadsPerUnit / 32];
  for (std::int32_t w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
  __syncthreads();
  for (std::int32_t e = a_begin + static_cast<std::int32_t>(threadIdx.x); e < a_end; e += blockDim.x) {
    const std::int32_t k = __ldg(p.a_col + e);
    atomicOr(bits + (k >> 5), 1u << (k & 31));
  }
  __syncthreads();
  // Exclusive sum of the words' popcounts: each thread a run of words, a scan of the runs.
  const std::int32_t per = (words + blockDim.x - 1) / blockDim.x;
  const std::int32_t w0 = static_cast<std::int32_t>(threadIdx.x) * per;
  const std::int32_t w1 = w0 + per < words ? w0 + per : words;
  std::int32_t own = 0;
  for (std::int32_t w = w0; w < w1; ++w) own += __popc(bits[w]);
  const int lane = threadIdx.x & 31;
  std::int32_t inclusive = own;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const std::int32_t up = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) warp_sums[threadIdx.x / 32] = inclusive;
  __syncthreads();
  std::int32_t before = inclusive - own;
  for (unsigned w = 0; w < threadIdx.x / 32; ++w) before += warp_sums[w];
  for (std::int32_t w = w0; w < w1; ++w) {
    rank[w] = before;
    before += __popc(bits[w]);
  }
  __syncthreads();
}

// The matches of the A row (in the bitmap) with B's column j, in column order, pushed into
// every lane's tile alike: each lane tests one entry of a run of 32; the hits go round by shuffle.
template <typename Push>
__device__ __forceinline__ void bitmap_matches(const TileParams& p, std::int32_t a_begin, const std::uint32_t* bits,
                                               const std::int32_t* rank, std::int32_t j, Push&& push) {
  const int lane = threadIdx.x & 31;
  const std::int32_t e1 = __ldg(p.b_col_ptr + j + 1);
  for (std::int32_t base = __ldg(p.b_col_ptr + j); base < e1; base += 32) {
    const std::int32_t e = base + lane;
    bool hit = false;
    std::int32_t a_block = 0, b_block = 0;
    if (e < e1) {
      const std::int32_t k = __ldg(p.b_csc_row + e);
      const std::uint32_t word = bits[k >> 5], bit = 1u << (k & 31);
      if (word & bit) {
        hit = true;
        a_block = a_begin + rank[k >> 5] + __popc(word & (bit - 1));
        b_block = __ldg(p.b_csc_block + e);
      }
    }
    for (unsigned mask = __ballot_sync(0xFFFFFFFFu, hit); mask != 0; mask &= mask - 1) {
      const int from = __ffs(static_cast<int>(mask)) - 1;
      push(__shfl_sync(0xFFFFFFFFu, a_block, from), __shfl_sync(0xFFFFFFFFu, b_block, from));
    }
  }
}

}  // namespace detail

// One thread block (kThreadsPerUnit threads) a work unit; `bitmap_words` words (0: none fit) of
// dynamic shared memory twice over for the A row's bitmap and ranks; `b_column`: B's average
// column length, for the choice of matching.
template <int M>
__global__ void __launch_bounds__(kThreadsPerUnit) tensor_tile_kernel(TileParams p, const std::uint8_t* b_planes,
                                                                      std::int32_t bitmap_words, float b_column) {
  using Shape = tensor::Shape<M>;
  constexpr int kWarps = kThreadsPerUnit / 32;
  constexpr std::int64_t kStride = 8 + 4 * M * M;
  extern __shared__ std::uint32_t shared_words[];
  std::uint32_t* bits = shared_words;
  std::int32_t* rank = reinterpret_cast<std::int32_t*>(shared_words + bitmap_words);
  __shared__ unsigned int nonzero[kThreadsPerUnit];
  const WorkUnit unit = p.units[blockIdx.x];
  const std::int32_t a_begin = __ldg(p.a_row_ptr + unit.row), a_end = __ldg(p.a_row_ptr + unit.row + 1);
  for (int t = threadIdx.x; t < kThreadsPerUnit; t += blockDim.x) nonzero[t] = 0;
  const bool bitmap = bitmap_words > 0 && tensor::bitmap_pays(bitmap_words, a_end - a_begin, unit.tiles, b_column);
  if (bitmap) detail::build_row_bitmap(p, a_begin, a_end, bitmap_words, bits, rank);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int item = warp; item < unit.tiles * Shape::kWarpsPerTile; item += kWarps) {
    const int local = item / Shape::kWarpsPerTile, part = item % Shape::kWarpsPerTile;
    const std::int64_t tile = unit.first_tile + local;
    const std::int32_t j = p.tile_col[tile - p.chunk_first_tile];
    tensor::LaneTile<M> t(lane, part);
    const auto push = [&](std::int32_t a_block, std::int32_t b_block) {
      if (t.push(a_block, b_block)) detail::tensor_step<M>(t, p.a_values, b_planes);
    };
    if (bitmap)
      detail::bitmap_matches(p, a_begin, bits, rank, j, push);
    else
      detail::for_each_match(p, a_begin, a_end, __ldg(p.b_col_ptr + j), __ldg(p.b_col_ptr + j + 1), push);
    if (t.count > 0) detail::tensor_step<M>(t, p.a_values, b_planes);
    t.fold();

    std::byte* record = p.out + (tile - p.chunk_first_tile) * kStride;
    if (part == 0 && lane == 0) detail::store_index(record, p.a_row_begin + unit.row, j);
    std::uint32_t* values = reinterpret_cast<std::uint32_t*>(record + 8);
    unsigned int any = 0;
#pragma unroll
    for (int rg = 0; rg < tensor::LaneTile<M>::RG; ++rg)
#pragma unroll
      for (int cg = 0; cg < tensor::LaneTile<M>::CG; ++cg) {
        const tensor::Coord at = t.element(rg, cg, 0);  // element 1 is the next column
        const uint2 pair = make_uint2(detail::saturate(t.total[rg][cg][0]), detail::saturate(t.total[rg][cg][1]));
        *reinterpret_cast<uint2*>(values + at.row * M + at.col) = pair;
        any |= (t.total[rg][cg][0] | t.total[rg][cg][1]) != 0;
      }
    if (__any_sync(0xFFFFFFFFu, any) && lane == 0) atomicOr(&nonzero[local], 1u);
  }
  __syncthreads();
  for (int local = threadIdx.x; local < unit.tiles; local += blockDim.x)
    if (nonzero[local] == 0) atomicAdd(p.zero_tiles, 1u);
}

}  // namespace blockmm::kernels::cuda
