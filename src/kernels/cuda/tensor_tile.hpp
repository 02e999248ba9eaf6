// The host-testable half of the tensor-core block kernel (tensor_tile_kernel.cuh): which lane of
// a warp holds which element of the operands and accumulators of the int8 MMA it issues, and
// how one lane fills them from uint16 blocks split into byte planes, keeps its exact sums and
// finds its output elements. Everything here is __host__ __device__ and free of CUDA headers, so
// that tests/unit/tensor_tile_test.cpp runs the 32 lanes of a warp through this same code on
// the CPU, with the MMA simulated as the PTX ISA defines it, and compares with plain block
// products.
//
// The scheme. Every uint16 value is hi * 256 + lo. A tile's output rows and columns are cut into
// groups of 8. One `mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32` multiplies a 16 x 32 A
// operand by a 32 x 8 B operand: A's rows 0-7 are the hi bytes of 8 output rows' A entries,
// rows 8-15 their lo bytes; B is the hi (or lo) bytes of 8 output columns' B entries; the 32
// inner entries are one "K-step": 32 / m matched block products' inner dimensions side by side
// (m = 8: four, 16: two, 32: one). Two MMAs (B's hi plane, then its lo plane) give all four
// byte products of the 8 x 8 outputs: hh and lh, then hl and ll, in the accumulator rows 0-7 and
// 8-15 of one lane, so each lane combines its own elements. Each accumulator adds at most
// 32 * 255^2 a step: int32 is exact for kFlushSteps steps, after which the lane folds them into
// uint64 sums (hh 2^16 + (hl + lh) 2^8 + ll), which saturate to uint32 at the end exactly as the
// CUDA-core kernel does.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BLOCKMM_HD __host__ __device__
#define BLOCKMM_HD_INLINE __host__ __device__ __forceinline__
#else
#define BLOCKMM_HD
#define BLOCKMM_HD_INLINE inline
#endif
// Loops over a lane's register arrays unrolled on the device, so that they stay registers.
#if defined(__CUDA_ARCH__)
#define BLOCKMM_UNROLL _Pragma("unroll")
#else
#define BLOCKMM_UNROLL
#endif

namespace blockmm::kernels::cuda::tensor {

constexpr int kLanes = 32;
constexpr int kStep = 32;  // inner entries one MMA sums

struct Coord {
  int row, col;
};

// ---- the MMA's fragments, as the PTX ISA lays them out ------------------------------------
// (PTX ISA "Matrix Fragments for mma.m16n8k32", .u8: groupID = lane >> 2, threadID_in_group =
// lane % 4; the same as CUTLASS's SM80_16x8x32_S32U8U8S32_TN traits.)

// A (16 x 32, row-major), four .b32 registers of four bytes: register r, byte b holds row
// groupID + 8 (r & 1), column 4 threadID_in_group + b + 16 (r >> 1).
BLOCKMM_HD constexpr Coord a_element(int lane, int reg, int byte) {
  return {(lane >> 2) + 8 * (reg & 1), 4 * (lane & 3) + byte + 16 * (reg >> 1)};
}
// B (32 x 8, column-major), two registers: register r, byte b holds row 4 threadID_in_group + b
// + 16 r, column groupID.
BLOCKMM_HD constexpr Coord b_element(int lane, int reg, int byte) {
  return {4 * (lane & 3) + byte + 16 * reg, lane >> 2};
}
// C and D (16 x 8, s32), four registers: register r holds row groupID + 8 (r >> 1), column
// 2 threadID_in_group + (r & 1).
BLOCKMM_HD constexpr Coord c_element(int lane, int reg) {
  return {(lane >> 2) + 8 * (reg >> 1), 2 * (lane & 3) + (reg & 1)};
}

// ---- the kernel's choices ------------------------------------------------------------------

// Which inner entry of a K-step the MMA's column k stands for. The MMA sums over k in any order,
// so A and B need only agree: threadID t's columns (4t .. 4t+3 in registers 0 of A and B,
// 16+4t .. 16+4t+3 in A's register 2 and B's register 1) stand for inner entries 8t .. 8t+7, so
// that a lane reads 8 consecutive entries of one A row and one B column.
BLOCKMM_HD constexpr int inner_of_column(int k) { return k < 16 ? 8 * (k >> 2) + (k & 3) : 8 * ((k - 16) >> 2) + 4 + (k & 3); }

// A lane's 8 inner entries: those of match slot lane_slot of the step, entries lane_run_l ..
// lane_run_l + 7 of that block product's inner dimension (m a multiple of 8, at most 32).
BLOCKMM_HD constexpr int lane_slot(int m, int lane) { return 8 * (lane & 3) / m; }
BLOCKMM_HD constexpr int lane_run_l(int m, int lane) { return 8 * (lane & 3) % m; }

// How a tile of block size M is shared: a warp computes kRowGroups x kColGroups groups of 8 x 8
// outputs (its accumulators: 8 int32 and 2 uint64 a group and lane), kWarpsPerTile warps a tile.
template <int M>
struct Shape {
  static_assert(M == 8 || M == 16 || M == 32, "tensor-core block kernel: m = 8, 16 or 32");
  static constexpr int kGroups = M / 8;
  static constexpr int kRowGroups = M == 16 ? 2 : 1;
  static constexpr int kColGroups = M == 8 ? 1 : (M == 16 ? 2 : 4);
  static constexpr int kColParts = kGroups / kColGroups;
  static constexpr int kWarpsPerTile = (kGroups / kRowGroups) * kColParts;
  static constexpr int kSlots = kStep / M;  // block products a K-step
};

// K-steps between folds of the int32 accumulators into the uint64 sums: each step adds at most
// 32 * 255 * 255 to an accumulator, and 1024 steps of that stay below 2^31.
constexpr int kFlushSteps = 1024;
static_assert(std::int64_t{kFlushSteps} * kStep * 255 * 255 <= std::int64_t{2147483647}, "int32 accumulators overflow");

// The B operand's byte planes, made once a numeric phase from B's blocks (row-major m x m
// uint16, B[l][c]): for each column c and run r of 8 inner entries (l = 8r .. 8r+7), 16 bytes:
// the 8 hi bytes, then the 8 lo bytes. Block b's planes start at b * 2 m^2.
BLOCKMM_HD constexpr std::int64_t b_planes_offset(int m, int col, int run) { return (std::int64_t{col} * (m / 8) + run) * 16; }
BLOCKMM_HD_INLINE void b_planes_run(const std::uint16_t (&v)[8], std::uint8_t (&out)[16]) {
  for (int x = 0; x < 8; ++x) {
    out[x] = static_cast<std::uint8_t>(v[x] >> 8);
    out[8 + x] = static_cast<std::uint8_t>(v[x] & 255);
  }
}

// __byte_perm: byte i of the result is byte (s >> 4i) & 7 of the eight bytes y:x (x the low four).
BLOCKMM_HD_INLINE std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const std::uint64_t bytes = (std::uint64_t{y} << 32) | x;
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<std::uint32_t>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 255) << (8 * i);
  return r;
#endif
}

// 16 bytes from memory aligned to 16 (read-only on the device).
struct Words {
  std::uint32_t w[4];
};
BLOCKMM_HD_INLINE Words load16(const void* at) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(at));
  return {{v.x, v.y, v.z, v.w}};
#else
  Words v;
  std::memcpy(v.w, at, sizeof v.w);
  return v;
#endif
}

// One lane's part of a tile of block size M: the matches waiting for a K-step, the operands of
// the next step, the int32 accumulators and the uint64 sums. The kernel runs one a lane; the
// MMAs between load() and stepped() are the warp's (tensor_tile_kernel.cuh; the unit test
// simulates them).
template <int M>
struct LaneTile {
  using S = Shape<M>;
  static constexpr int RG = S::kRowGroups, CG = S::kColGroups, kSlots = S::kSlots;

  int lane, row_group0, col_group0;  // this warp's first row and column group of the tile
  int count = 0;                     // matches waiting (the same in every lane)
  int steps = 0;                     // K-steps since the last fold
  std::int32_t pending_a[kSlots], pending_b[kSlots];  // A's and B's block of each waiting match
  std::uint32_t a[RG][4];            // A operand of each row group: hi rows, lo rows
  std::uint32_t b[CG][4];            // B operand of each column group: hi (0, 1), lo (2, 3)
  std::int32_t acc_hi[RG][CG][4];    // D of the MMA with B's hi plane: hh (regs 0, 1), lh (2, 3)
  std::int32_t acc_lo[RG][CG][4];    // ... with B's lo plane: hl (0, 1), ll (2, 3)
  std::uint64_t total[RG][CG][2];    // exact sums of the lane's two elements of each group

  // Part `part` (0 .. kWarpsPerTile - 1) of the tile.
  BLOCKMM_HD LaneTile(int lane_, int part)
      : lane(lane_), row_group0(part / S::kColParts * RG), col_group0(part % S::kColParts * CG) {
    for (int s = 0; s < kSlots; ++s) pending_a[s] = pending_b[s] = 0;
    for (int rg = 0; rg < RG; ++rg)
      for (int cg = 0; cg < CG; ++cg)
        for (int r = 0; r < 4; ++r) {
          acc_hi[rg][cg][r] = acc_lo[rg][cg][r] = 0;
          if (r < 2) total[rg][cg][r] = 0;
        }
  }

  // A match (A's block, B's block, indices into their values); true when a K-step is full.
  BLOCKMM_HD_INLINE bool push(std::int32_t a_block, std::int32_t b_block) {
BLOCKMM_UNROLL
    for (int s = 0; s < kSlots; ++s)
      if (s == count) {
        pending_a[s] = a_block;
        pending_b[s] = b_block;
      }
    return ++count == kSlots;
  }

  // The next step's operands from the waiting matches (slots past `count` are zeros, which add
  // nothing); the matches are then taken.
  BLOCKMM_HD_INLINE void load(const std::uint16_t* a_values, const std::uint8_t* b_planes) {
    const int slot = lane_slot(M, lane);
    std::int32_t a_block = 0, b_block = 0;
    BLOCKMM_UNROLL
    for (int s = 0; s < kSlots; ++s)
      if (s == slot) {
        a_block = pending_a[s];
        b_block = pending_b[s];
      }
    load_match(a_block, b_block, slot < count, a_values, b_planes);
    count = 0;
  }

  // The next step's operands where the lane's own match (that of its slot, lane_slot) is given:
  // A's and B's block, and whether there is one (else zeros). The blocks are read either way
  // (the indices must be valid ones), so that no lane branches before the warp's MMAs.
  BLOCKMM_HD_INLINE void load_match(std::int32_t a_block, std::int32_t b_block, bool valid, const std::uint16_t* a_values,
                                    const std::uint8_t* b_planes) {
    const int l0 = lane_run_l(M, lane), g = lane >> 2;
    const std::uint32_t keep = valid ? 0xFFFFFFFFu : 0u;
    BLOCKMM_UNROLL
    for (int rg = 0; rg < RG; ++rg) {
      // A's row 8 (row_group0 + rg) + g, entries l0 .. l0+7: hi bytes to registers 0 and 2 (the
      // MMA's rows g), lo bytes to 1 and 3 (rows g + 8).
      Words q = load16(a_values + std::int64_t{a_block} * M * M + std::int64_t{8 * (row_group0 + rg) + g} * M + l0);
      for (int r = 0; r < 4; ++r) q.w[r] &= keep;
      a[rg][0] = byte_perm(q.w[0], q.w[1], 0x7531);
      a[rg][1] = byte_perm(q.w[0], q.w[1], 0x6420);
      a[rg][2] = byte_perm(q.w[2], q.w[3], 0x7531);
      a[rg][3] = byte_perm(q.w[2], q.w[3], 0x6420);
    }
    BLOCKMM_UNROLL
    for (int cg = 0; cg < CG; ++cg) {
      // B's column 8 (col_group0 + cg) + g, entries l0 .. l0+7: the run's hi bytes, then its lo.
      const Words q = load16(b_planes + std::int64_t{b_block} * 2 * M * M + b_planes_offset(M, 8 * (col_group0 + cg) + g, l0 / 8));
      for (int r = 0; r < 4; ++r) b[cg][r] = q.w[r] & keep;
    }
  }

  // After the step's MMAs: folds the accumulators every kFlushSteps steps.
  BLOCKMM_HD_INLINE void stepped() {
    if (++steps == kFlushSteps) fold();
  }

  // The accumulators into the uint64 sums: element e of a group takes hh 2^16 + (hl + lh) 2^8 + ll.
  BLOCKMM_HD_INLINE void fold() {
BLOCKMM_UNROLL
    for (int rg = 0; rg < RG; ++rg)
BLOCKMM_UNROLL
      for (int cg = 0; cg < CG; ++cg)
BLOCKMM_UNROLL
        for (int e = 0; e < 2; ++e) {
          const std::uint64_t hh = static_cast<std::uint32_t>(acc_hi[rg][cg][e]);
          const std::uint64_t lh = static_cast<std::uint32_t>(acc_hi[rg][cg][2 + e]);
          const std::uint64_t hl = static_cast<std::uint32_t>(acc_lo[rg][cg][e]);
          const std::uint64_t ll = static_cast<std::uint32_t>(acc_lo[rg][cg][2 + e]);
          total[rg][cg][e] += (hh << 16) + ((hl + lh) << 8) + ll;
          acc_hi[rg][cg][e] = acc_hi[rg][cg][2 + e] = acc_lo[rg][cg][e] = acc_lo[rg][cg][2 + e] = 0;
        }
    steps = 0;
  }

  // The tile's (row, column) of element e (0, 1) of group (rg, cg).
  BLOCKMM_HD_INLINE Coord element(int rg, int cg, int e) const {
    return {8 * (row_group0 + rg) + (lane >> 2), 8 * (col_group0 + cg) + 2 * (lane & 3) + e};
  }
};

// Whether a work unit (one A row against `tiles` B columns) finds its matches through a bitmap
// of the A row's columns in shared memory (set up once a unit: clearing and ranking its
// `bitmap_words` words and setting its `a_blocks` bits; then each B column is scanned 32 entries
// at a time) rather than by every warp walking both lists with two pointers (or searching the
// long one, where one is far longer). Rough warp-instruction counts of each; the bitmap wins on
// uniform rows, the walk on a very long A row against short B columns, whose search is cheap.
BLOCKMM_HD_INLINE bool bitmap_pays(std::int64_t bitmap_words, std::int64_t a_blocks, std::int64_t tiles,
                                   double b_column) {
  const double setup = (2.0 * static_cast<double>(bitmap_words) + static_cast<double>(a_blocks)) * 5 / 32;
  const double scans = static_cast<double>(tiles) * b_column * 15 / 32;
  const double a = static_cast<double>(a_blocks);
  const double shorter = a < b_column ? a : b_column;
  const double walk_steps = a + b_column < 20 * (shorter + 1) ? a + b_column : 20 * (shorter + 1);
  return setup + scans < static_cast<double>(tiles) * 8 * walk_steps;
}

}  // namespace blockmm::kernels::cuda::tensor
