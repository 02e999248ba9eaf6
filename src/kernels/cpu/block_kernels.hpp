// The cpu numeric phase's inner kernel: one A block times the blocks of one B row, each
// product added with saturation into the accumulator of its output tile. One implementation
// per instruction-set level (portable C++; AVX2, AVX-512 and AVX-512 IFMA widened to 64 bits;
// AVX2, AVX-512 and AVX-512 VNNI in byte planes), chosen at run time; the level is an explicit
// parameter so that tests and the kernel bench can run every level the CPU supports.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/block_row_task.hpp"

namespace blockmm::kernels::cpu {

// The *_planes levels and avx512_vnni are the byte-plane form (byte_planes.hpp); where it does
// not apply (m = 1, m > planes::kMaxBlock) they run the widened kernel of their instruction set.
enum class SimdLevel { portable, avx2, avx2_planes, avx512, avx512_ifma, avx512_planes, avx512_vnni };

inline constexpr SimdLevel kAllSimdLevels[] = {SimdLevel::portable,      SimdLevel::avx2,
                                               SimdLevel::avx2_planes,   SimdLevel::avx512,
                                               SimdLevel::avx512_ifma,   SimdLevel::avx512_planes,
                                               SimdLevel::avx512_vnni};

std::string to_string(SimdLevel level);

// Whether this build contains the level's kernels and this CPU (and OS) can run them.
bool simd_level_available(SimdLevel level);

// The fastest available level.
SimdLevel best_simd_level();

// The kernel of `level` for block size m >= 1. Throws std::invalid_argument when the level is
// not available (see simd_level_available) or m < 1.
BlockRowKernel block_row_kernel(SimdLevel level, std::int32_t m);

// The accumulator stride (in uint32, tile to tile) at which padded_block_row_kernel works on
// whole aligned registers, 0 where `level` has no such form for m: the small-block kernels that
// hold a tile in the lanes of a few registers (m = 2, 3, 5, 6, 7 on AVX-512) take the tile's m^2
// lanes rounded up to registers of 16; the strip kernel for m = 9..64 (AVX-512) takes m tile rows
// of padded_row_stride lanes each. Lanes past the tile's values are scratch.
std::int64_t padded_accumulator_stride(SimdLevel level, std::int32_t m);

// Lanes from one tile row to the next at the padded stride: m where the padded tile's values are
// contiguous (the small-block kernels), 16 ceil(m / 16) for the strip kernel; 0 where none.
std::int64_t padded_row_stride(SimdLevel level, std::int32_t m);

// The block-row kernel for a 64-byte aligned accumulator at the padded stride (null where there
// is none; block_row_kernel takes any stride).
BlockRowKernel padded_block_row_kernel(SimdLevel level, std::int32_t m);

// The whole-row kernel of those small-block kernels (RowTask), or null where `level` has none
// for m (then padded_accumulator_stride is 0 too).
RowKernel row_kernel(SimdLevel level, std::int32_t m);

}  // namespace blockmm::kernels::cpu
