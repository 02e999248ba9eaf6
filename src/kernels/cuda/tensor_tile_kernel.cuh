// The tensor-core block kernel for m = 8, 16, 32 (tensor_tile.hpp has the scheme and the
// host-tested lane logic): the same work units as the CUDA-core tile kernel (a run of output
// tiles of one block-row a thread block), each tile's block products found by matching A's row
// against B's column, multiplied as byte planes by int8 MMAs with int32 accumulators folded into
// uint64 sums, saturated into the tile's output record. Included by sparse_numeric.cu alone.
//
// Matching, per work unit (both exact; the order of the matches does not matter):
// - a bitmap of the A row's block columns in shared memory, with each word's rank (the A
//   blocks before it), so that each B column is scanned 32 entries at a time by one warp, a
//   ballot placing the hits in a per-warp queue from which each K-step's lanes read their
//   match (no dependent loads, unlike a walk);
// - or, where the bitmap does not fit shared memory or does not pay (tensor_tile.hpp,
//   bitmap_pays: a very long A row against short columns), the CUDA-core kernel's two-pointer
//   walk with its search of a far longer list (tile_kernel.cuh, for_each_match_batch), run by
//   every lane of a warp alike, each batch into the same queue.
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

// The warp's MMAs of one K-step on the operands its lanes loaded.
template <int M>
__device__ __forceinline__ void tensor_mmas(tensor::LaneTile<M>& t) {
  __syncwarp();
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

// A warp's queue of matches in shared memory (A's block, B's block), filled by either matching
// a run at a time (the bitmap's hits among 32 B-column entries, or a batch of the walk's), from
// which each K-step's lanes read their slot's match; fewer than a step's worth wait for the next
// run. The same in every lane but `entries`' contents.
constexpr int kMatchQueue = 64;  // at least 32 new matches plus a step's worth waiting

template <int M>
struct MatchQueue {
  static constexpr int kSlots = tensor::Shape<M>::kSlots;
  int2* entries;
  int queued = 0;

  // The K-steps the queue holds, multiplied into the lanes' tile; the rest to the front.
  __device__ __forceinline__ void run_steps(tensor::LaneTile<M>& t, const std::uint16_t* a_values,
                                            const std::uint8_t* b_planes) {
    __syncwarp();
    const int lane = threadIdx.x & 31, slot = tensor::lane_slot(M, lane);
    int head = 0;
    for (; queued - head >= kSlots; head += kSlots) {
      const int2 match = entries[head + slot];
      t.load_match(match.x, match.y, true, a_values, b_planes);
      tensor_mmas(t);
    }
    const int rest = queued - head;
    int2 carried = make_int2(0, 0);
    if (lane < rest) carried = entries[head + lane];
    __syncwarp();
    if (lane < rest) entries[lane] = carried;
    __syncwarp();
    queued = rest;
  }

  // The last step, its empty slots zeros (their blocks any valid ones: block 0).
  __device__ __forceinline__ void finish(tensor::LaneTile<M>& t, const std::uint16_t* a_values,
                                         const std::uint8_t* b_planes) {
    if (queued > 0) {
      const int slot = tensor::lane_slot(M, threadIdx.x & 31);
      const bool valid = slot < queued;
      const int2 match = valid ? entries[slot] : make_int2(0, 0);
      t.load_match(match.x, match.y, valid, a_values, b_planes);
      tensor_mmas(t);
    }
    queued = 0;
    __syncwarp();  // the queue is the next tile's
  }
};

// The matches of the A row (in the bitmap) with B's column j, multiplied into the lanes' tile:
// each lane tests one entry of a run of 32 (the next run's entries loaded before this run's
// steps), a ballot places the hits in the queue in column order.
template <int M>
__device__ __forceinline__ void bitmap_tile(const TileParams& p, std::int32_t a_begin, const std::uint32_t* bits,
                                            const std::int32_t* rank, std::int32_t j, MatchQueue<M>& queue,
                                            tensor::LaneTile<M>& t, const std::uint8_t* b_planes) {
  const int lane = threadIdx.x & 31;
  const std::int32_t e0 = __ldg(p.b_col_ptr + j), e1 = __ldg(p.b_col_ptr + j + 1);
  std::int32_t k_next = 0, block_next = 0;
  if (e0 + lane < e1) {
    k_next = __ldg(p.b_csc_row + e0 + lane);
    block_next = __ldg(p.b_csc_block + e0 + lane);
  }
  for (std::int32_t base = e0; base < e1; base += 32) {
    const std::int32_t k = k_next, b_block = block_next;
    const bool present = base + lane < e1;
    if (base + 32 + lane < e1) {
      k_next = __ldg(p.b_csc_row + base + 32 + lane);
      block_next = __ldg(p.b_csc_block + base + 32 + lane);
    }
    bool hit = false;
    std::int32_t a_block = 0;
    if (present) {
      const std::uint32_t word = bits[k >> 5], bit = 1u << (k & 31);
      hit = (word & bit) != 0;
      a_block = a_begin + rank[k >> 5] + __popc(word & (bit - 1));
    }
    const unsigned mask = __ballot_sync(0xFFFFFFFFu, hit);
    if (hit) queue.entries[queue.queued + __popc(mask & ((1u << lane) - 1))] = make_int2(a_block, b_block);
    queue.queued += __popc(mask);
    queue.run_steps(t, p.a_values, b_planes);
  }
  queue.finish(t, p.a_values, b_planes);
}

// The same by the two-pointer walk (and its search of a far longer list), a batch at a time.
template <int M>
__device__ __forceinline__ void walk_tile(const TileParams& p, std::int32_t a_begin, std::int32_t a_end, std::int32_t j,
                                          MatchQueue<M>& queue, tensor::LaneTile<M>& t, const std::uint8_t* b_planes) {
  const int lane = threadIdx.x & 31;
  for_each_match_batch(p, a_begin, a_end, __ldg(p.b_col_ptr + j), __ldg(p.b_col_ptr + j + 1),
                       [&](const std::int32_t (&ma)[kMatchBatch], const std::int32_t (&mb)[kMatchBatch], int count) {
                         // Every lane holds the batch; lane q writes match q.
                         std::int32_t a_block = 0, b_block = 0;
#pragma unroll
                         for (int q = 0; q < kMatchBatch; ++q)
                           if (q == lane) {
                             a_block = ma[q];
                             b_block = mb[q];
                           }
                         if (lane < count) queue.entries[queue.queued + lane] = make_int2(a_block, b_block);
                         queue.queued += count;
                         queue.run_steps(t, p.a_values, b_planes);
                       });
  queue.finish(t, p.a_values, b_planes);
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
  __shared__ int2 queues[kWarps][detail::kMatchQueue];
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
    detail::MatchQueue<M> queue{queues[warp]};
    if (bitmap)
      detail::bitmap_tile<M>(p, a_begin, bits, rank, j, queue, t, b_planes);
    else
      detail::walk_tile<M>(p, a_begin, a_end, j, queue, t, b_planes);
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
