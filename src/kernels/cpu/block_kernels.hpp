// The cpu numeric phase's inner kernel: one A block times the blocks of one B row, each
// product added with saturation into the accumulator of its output tile. One implementation
// per instruction-set level (portable C++, AVX2 widened or in byte planes, AVX-512, AVX-512
// IFMA), chosen at run time; the level is an explicit parameter so that tests and the kernel
// bench can run every level the CPU supports.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/block_row_task.hpp"

namespace blockmm::kernels::cpu {

// avx2_planes is the byte-plane form (byte_planes.hpp) on AVX2; it runs the widened avx2 kernel
// where it does not apply (m = 1, m > planes::kMaxBlock).
enum class SimdLevel { portable, avx2, avx2_planes, avx512, avx512_ifma };

inline constexpr SimdLevel kAllSimdLevels[] = {SimdLevel::portable, SimdLevel::avx2, SimdLevel::avx2_planes,
                                               SimdLevel::avx512, SimdLevel::avx512_ifma};

std::string to_string(SimdLevel level);

// Whether this build contains the level's kernels and this CPU (and OS) can run them.
bool simd_level_available(SimdLevel level);

// The fastest available level.
SimdLevel best_simd_level();

// The kernel of `level` for block size m >= 1. Throws std::invalid_argument when the level is
// not available (see simd_level_available) or m < 1.
BlockRowKernel block_row_kernel(SimdLevel level, std::int32_t m);

}  // namespace blockmm::kernels::cpu
