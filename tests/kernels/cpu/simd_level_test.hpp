// What the cpu kernel tests share: a test parameterised by the SIMD level that skips, with a
// message, the levels this CPU or build cannot run, and the levels' names as test names.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/block_kernels.hpp"

namespace blockmm::testing {

class SimdLevelTest : public ::testing::TestWithParam<kernels::cpu::SimdLevel> {
 protected:
  void SetUp() override {
    if (!kernels::cpu::simd_level_available(GetParam()))
      GTEST_SKIP() << kernels::cpu::to_string(GetParam()) << " kernels: not supported by this CPU or build";
  }
};

inline std::string simd_level_test_name(const ::testing::TestParamInfo<kernels::cpu::SimdLevel>& param_info) {
  std::string name = kernels::cpu::to_string(param_info.param);
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

// The block kernels' oracle: for each B block f in [0, count) whose column has a tile (slot >= 0),
// exact[tile * tile_stride + r * row_stride + c] += sum_l a(r, l) b_f(l, c), in 64 bits.
inline void add_exact_products(std::vector<std::uint64_t>& exact, std::int64_t tile_stride, std::int64_t row_stride,
                               std::int32_t m, const std::uint16_t* a, const std::uint16_t* b, const std::int32_t* b_col,
                               std::int64_t count, const std::int32_t* slot) {
  const std::int64_t mm = std::int64_t{m} * m;
  for (std::int64_t f = 0; f < count; ++f) {
    const std::int32_t s = slot[b_col[f]];
    if (s < 0) continue;
    for (std::int32_t r = 0; r < m; ++r)
      for (std::int32_t c = 0; c < m; ++c) {
        std::uint64_t sum = 0;
        for (std::int32_t l = 0; l < m; ++l) sum += std::uint64_t{a[r * m + l]} * b[f * mm + l * m + c];
        exact[static_cast<std::size_t>(s * tile_stride + r * row_stride + c)] += sum;
      }
  }
}

}  // namespace blockmm::testing
