// What the cpu kernel tests share: a test parameterised by the SIMD level that skips, with a
// message, the levels this CPU or build cannot run, and the levels' names as test names.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

}  // namespace blockmm::testing
