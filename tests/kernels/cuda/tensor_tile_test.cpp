// The tensor-core block kernel's lane logic (kernels/cuda/tensor_tile.hpp) on the CPU: a warp's
// 32 lanes run the kernel's own code (matches waiting for a K-step, operands loaded from uint16
// blocks and B's byte planes, folds of the int32 accumulators, output elements), and the MMA
// between them is simulated as the PTX ISA defines mma.m16n8k32 .u8 (each lane's register bytes
// placed by the documented fragment layout, D = A B + C, D handed back by its layout). The tiles
// must equal plain block products for m = 8, 16, 32, with every count of matches around a K-step,
// values at 65535, and enough matches to cross several folds; every accumulator stays inside
// int32. Runs without a GPU (CI): this is what catches a fragment layout bug before a GPU does.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/tensor_tile.hpp"

namespace blockmm::kernels::cuda::tensor {
namespace {

// Every element of the 16 x 32 A, 32 x 8 B and 16 x 8 C fragments is held by exactly one
// (lane, register, byte) of the PTX layouts.
TEST(TensorTileLayout, FragmentLayoutsCoverEachElementOnce) {
  std::array<int, 16 * 32> a{};
  std::array<int, 32 * 8> b{};
  std::array<int, 16 * 8> c{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int byte = 0; byte < 4; ++byte) {
        const Coord x = a_element(lane, reg, byte);
        ASSERT_TRUE(x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 32);
        ++a[static_cast<std::size_t>(x.row * 32 + x.col)];
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int byte = 0; byte < 4; ++byte) {
        const Coord x = b_element(lane, reg, byte);
        ASSERT_TRUE(x.row >= 0 && x.row < 32 && x.col >= 0 && x.col < 8);
        ++b[static_cast<std::size_t>(x.row * 8 + x.col)];
      }
    for (int reg = 0; reg < 4; ++reg) {
      const Coord x = c_element(lane, reg);
      ASSERT_TRUE(x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 8);
      ++c[static_cast<std::size_t>(x.row * 8 + x.col)];
    }
  }
  for (const int n : a) EXPECT_EQ(n, 1);
  for (const int n : b) EXPECT_EQ(n, 1);
  for (const int n : c) EXPECT_EQ(n, 1);
  // The PTX ISA's own examples: lane 5 (groupID 1, threadID 1) holds A(1, 4..7) in register 0,
  // A(9, 20..23) in register 3, B(16 + 4..7, 1) in register 1, C(9, 3) in register 3.
  EXPECT_EQ(a_element(5, 0, 0).row, 1);
  EXPECT_EQ(a_element(5, 0, 0).col, 4);
  EXPECT_EQ(a_element(5, 3, 3).row, 9);
  EXPECT_EQ(a_element(5, 3, 3).col, 23);
  EXPECT_EQ(b_element(5, 1, 0).row, 20);
  EXPECT_EQ(b_element(5, 1, 0).col, 1);
  EXPECT_EQ(c_element(5, 3).row, 9);
  EXPECT_EQ(c_element(5, 3).col, 3);
  // The kernel's order of the inner entries is a permutation of a K-step.
  std::array<int, kStep> inner{};
  for (int k = 0; k < kStep; ++k) ++inner[static_cast<std::size_t>(inner_of_column(k))];
  for (const int n : inner) EXPECT_EQ(n, 1);
}

TEST(TensorTileLayout, BytePermAsTheDeviceDefinesIt) {
  const std::uint32_t x = 0x33221100u, y = 0x77665544u;
  EXPECT_EQ(byte_perm(x, y, 0x7531), 0x77553311u);
  EXPECT_EQ(byte_perm(x, y, 0x6420), 0x66442200u);
  EXPECT_EQ(byte_perm(x, y, 0x3210), x);
  EXPECT_EQ(byte_perm(x, y, 0x7654), y);
}

// One m16n8k32 .u8 MMA of a warp, as the PTX ISA defines it, on the lanes' registers: A from
// operand a[rg], B from b[cg] (its hi registers 0, 1 or lo registers 2, 3), C and D the lanes'
// acc_hi or acc_lo of (rg, cg). False if an accumulator left int32.
template <int M>
bool simulate_mma(std::vector<LaneTile<M>>& lanes, int rg, int cg, bool lo_plane) {
  std::int64_t a[16][32], b[32][8], d[16][8];
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int byte = 0; byte < 4; ++byte) {
        const Coord x = a_element(lane, reg, byte);
        a[x.row][x.col] = (lanes[lane].a[rg][reg] >> (8 * byte)) & 255;
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int byte = 0; byte < 4; ++byte) {
        const Coord x = b_element(lane, reg, byte);
        b[x.row][x.col] = (lanes[lane].b[cg][(lo_plane ? 2 : 0) + reg] >> (8 * byte)) & 255;
      }
    for (int reg = 0; reg < 4; ++reg) {
      const Coord x = c_element(lane, reg);
      d[x.row][x.col] = lo_plane ? lanes[lane].acc_lo[rg][cg][reg] : lanes[lane].acc_hi[rg][cg][reg];
    }
  }
  bool inside = true;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 32; ++k) d[i][j] += a[i][k] * b[k][j];
      inside = inside && d[i][j] >= INT32_MIN && d[i][j] <= INT32_MAX;
    }
  for (int lane = 0; lane < kLanes; ++lane)
    for (int reg = 0; reg < 4; ++reg) {
      const Coord x = c_element(lane, reg);
      (lo_plane ? lanes[lane].acc_lo[rg][cg][reg] : lanes[lane].acc_hi[rg][cg][reg]) = static_cast<std::int32_t>(d[x.row][x.col]);
    }
  return inside;
}

// B's blocks (row-major uint16) as the kernel's byte planes, through the kernel's own layout.
template <int M>
std::vector<std::uint8_t> b_planes_of(const std::vector<std::uint16_t>& b_values) {
  const std::size_t blocks = b_values.size() / (M * M);
  std::vector<std::uint8_t> planes(blocks * 2 * M * M);
  for (std::size_t block = 0; block < blocks; ++block)
    for (int col = 0; col < M; ++col)
      for (int run = 0; run < M / 8; ++run) {
        std::uint16_t v[8];
        for (int x = 0; x < 8; ++x) v[x] = b_values[block * M * M + static_cast<std::size_t>((8 * run + x) * M + col)];
        std::uint8_t out[16];
        b_planes_run(v, out);
        for (int x = 0; x < 16; ++x) planes[block * 2 * M * M + static_cast<std::size_t>(b_planes_offset(M, col, run)) + x] = out[x];
      }
  return planes;
}

// A tile from `matches` (A's block, B's block) as the kernel computes it: each warp part's 32
// lanes pushed every match, a K-step (loads, two MMAs a group, fold every kFlushSteps) when full
// and once more for the rest, then the sums at their elements. `inside`: no accumulator left int32.
template <int M>
std::vector<std::uint64_t> kernel_tile(const std::vector<std::uint16_t>& a_values, const std::vector<std::uint16_t>& b_values,
                                       const std::vector<std::pair<int, int>>& matches, bool& inside) {
  using Tile = LaneTile<M>;
  // Aligned copies, as the device's allocations are (the lanes read 16 bytes at a time).
  std::vector<std::array<std::uint64_t, 2>> a_store((a_values.size() * 2 + 15) / 16);
  std::memcpy(a_store.data(), a_values.data(), a_values.size() * 2);
  const std::vector<std::uint8_t> planes_bytes = b_planes_of<M>(b_values);
  std::vector<std::array<std::uint64_t, 2>> b_store((planes_bytes.size() + 15) / 16);
  std::memcpy(b_store.data(), planes_bytes.data(), planes_bytes.size());
  const auto* a = reinterpret_cast<const std::uint16_t*>(a_store.data());
  const auto* b = reinterpret_cast<const std::uint8_t*>(b_store.data());

  std::vector<std::uint64_t> out(M * M, 0);
  std::vector<int> written(M * M, 0);
  inside = true;
  for (int part = 0; part < Shape<M>::kWarpsPerTile; ++part) {
    std::vector<Tile> lanes;
    for (int lane = 0; lane < kLanes; ++lane) lanes.emplace_back(lane, part);
    const auto step = [&] {
      for (Tile& t : lanes) t.load(a, b);
      for (int rg = 0; rg < Tile::RG; ++rg)
        for (int cg = 0; cg < Tile::CG; ++cg) {
          inside = simulate_mma(lanes, rg, cg, false) && inside;
          inside = simulate_mma(lanes, rg, cg, true) && inside;
        }
      for (Tile& t : lanes) t.stepped();
    };
    for (const auto& [a_block, b_block] : matches) {
      bool full = false;
      for (Tile& t : lanes) full = t.push(a_block, b_block);
      if (full) step();
    }
    if (lanes[0].count > 0) step();
    for (Tile& t : lanes) {
      t.fold();
      for (int rg = 0; rg < Tile::RG; ++rg)
        for (int cg = 0; cg < Tile::CG; ++cg)
          for (int e = 0; e < 2; ++e) {
            const Coord x = t.element(rg, cg, e);
            out[static_cast<std::size_t>(x.row * M + x.col)] = t.total[rg][cg][e];
            ++written[static_cast<std::size_t>(x.row * M + x.col)];
          }
    }
  }
  for (const int n : written) EXPECT_EQ(n, 1) << "every output element written once";
  return out;
}

// The plain block products: C = sum over the matches of A_block B_block, in uint64.
template <int M>
std::vector<std::uint64_t> plain_tile(const std::vector<std::uint16_t>& a_values, const std::vector<std::uint16_t>& b_values,
                                      const std::vector<std::pair<int, int>>& matches) {
  std::vector<std::uint64_t> out(M * M, 0);
  for (const auto& [a_block, b_block] : matches)
    for (int i = 0; i < M; ++i)
      for (int l = 0; l < M; ++l) {
        const std::uint64_t x = a_values[static_cast<std::size_t>(a_block) * M * M + static_cast<std::size_t>(i * M + l)];
        for (int j = 0; j < M; ++j)
          out[static_cast<std::size_t>(i * M + j)] +=
              x * b_values[static_cast<std::size_t>(b_block) * M * M + static_cast<std::size_t>(l * M + j)];
      }
  return out;
}

template <int M>
void check_random_tiles(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int slots = Shape<M>::kSlots;
  // Counts of matches around a K-step's slots, and longer runs.
  std::vector<int> counts{0, 1, slots - 1, slots, slots + 1, 2 * slots, 2 * slots + 1, 37, 100};
  for (std::size_t c = 0; c < counts.size() * 3; ++c) {
    const int count = counts[c % counts.size()];
    const std::uint32_t largest = std::vector<std::uint32_t>{65535, 1023, 255}[c / counts.size()];
    const int blocks = 12;
    std::uniform_int_distribution<std::uint32_t> value(0, largest);
    std::vector<std::uint16_t> a_values(blocks * M * M), b_values(blocks * M * M);
    for (auto& x : a_values) x = static_cast<std::uint16_t>(value(rng));
    for (auto& x : b_values) x = static_cast<std::uint16_t>(value(rng));
    std::uniform_int_distribution<int> block(0, blocks - 1);
    std::vector<std::pair<int, int>> matches;
    for (int q = 0; q < count; ++q) matches.push_back({block(rng), block(rng)});
    bool inside = false;
    const std::vector<std::uint64_t> got = kernel_tile<M>(a_values, b_values, matches, inside);
    ASSERT_TRUE(got == plain_tile<M>(a_values, b_values, matches)) << "m=" << M << " matches=" << count << " largest=" << largest;
    EXPECT_TRUE(inside);
  }
}

TEST(TensorTileLanes, RandomTilesEqualPlainBlockProductsM8) { check_random_tiles<8>(8); }
TEST(TensorTileLanes, RandomTilesEqualPlainBlockProductsM16) { check_random_tiles<16>(16); }
TEST(TensorTileLanes, RandomTilesEqualPlainBlockProductsM32) { check_random_tiles<32>(32); }

// Every value 65535 (every byte 255, the accumulators' fastest growth) over more K-steps than a
// fold (two at m = 8, 16; m = 32's four warps a tile cost the simulation most): the int32
// accumulators never leave their range, the sums stay exact (and pass 2^32, so the kernel's
// output saturates).
template <int M>
void check_folds() {
  const int steps = (M == 32 ? 1 : 2) * kFlushSteps + 5;
  std::vector<std::uint16_t> a_values(2 * M * M, 65535), b_values(2 * M * M, 65535);
  a_values[3] = 7;  // one element differs: the sums are not all alike
  std::vector<std::pair<int, int>> matches;
  for (int q = 0; q < steps * Shape<M>::kSlots; ++q) matches.push_back({q % 2, (q / 2) % 2});
  bool inside = false;
  const std::vector<std::uint64_t> got = kernel_tile<M>(a_values, b_values, matches, inside);
  EXPECT_TRUE(inside) << "m=" << M;
  const std::vector<std::uint64_t> expected = plain_tile<M>(a_values, b_values, matches);
  ASSERT_TRUE(got == expected) << "m=" << M;
  EXPECT_GT(expected[0], std::uint64_t{1} << 32);
}

TEST(TensorTileLanes, FoldsKeepTheInt32AccumulatorsExactM8) { check_folds<8>(); }
TEST(TensorTileLanes, FoldsKeepTheInt32AccumulatorsExactM16) { check_folds<16>(); }
TEST(TensorTileLanes, FoldsKeepTheInt32AccumulatorsExactM32) { check_folds<32>(); }

// The bitmap of an A row pays on uniform rows and not for a very long row against short columns
// (whose search is cheap), nor where the bitmap's words dwarf a few short lists.
TEST(TensorTileMatching, BitmapWhereItPaysTheWalkElsewhere) {
  EXPECT_TRUE(bitmap_pays(256, 410, 32, 410));         // 5 % of p = 8192, a unit of 32 tiles
  EXPECT_TRUE(bitmap_pays(512, 4096, 32, 4096));       // a quarter of p = 16384
  EXPECT_TRUE(bitmap_pays(196, 625, 16, 625));         // m = 16, a tenth of p = 6250
  EXPECT_FALSE(bitmap_pays(8192, 200000, 32, 3));      // a skewed row against columns of 3
  EXPECT_FALSE(bitmap_pays(8192, 2, 1, 2));            // two short lists, a wide bitmap
  EXPECT_FALSE(bitmap_pays(1, 0, 1, 0));               // an empty row: nothing to walk
}

}  // namespace
}  // namespace blockmm::kernels::cuda::tensor
