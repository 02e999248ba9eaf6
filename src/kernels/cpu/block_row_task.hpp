// The argument of the cpu block kernels (see block_kernels.hpp). Kept free of any standard
// library header but <cstdint>: it is included by files compiled for AVX2 / AVX-512, whose
// inline functions must never be picked by the linker for code that runs on other CPUs.
#pragma once

#include <cstdint>

namespace blockmm::kernels::cpu {

// For f in [0, count): if slot[b_col[f]] >= 0, acc[slot * m*m ..] = saturate(acc + A x B_f),
// where B_f is the m x m block at b_values + f*m*m (row-major, like A). acc holds uint32
// values already saturated (exact: every term is non-negative). a_scratch has room for m*m
// uint64 values (the kernels widen A once there and reuse it for every B block).
struct BlockRowTask {
  std::uint32_t* acc;
  std::int32_t m;
  const std::uint16_t* a;
  const std::uint16_t* b_values;
  const std::int32_t* b_col;
  std::int64_t count;
  const std::int32_t* slot;
  std::uint64_t* a_scratch;
};
using BlockRowKernel = void (*)(const BlockRowTask& task);

// The per-level tables, defined in block_row_*.cpp (the x86 ones only in x86 builds).
BlockRowKernel portable_block_row_kernel(std::int32_t m);
BlockRowKernel avx2_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_ifma_block_row_kernel(std::int32_t m);

}  // namespace blockmm::kernels::cpu
