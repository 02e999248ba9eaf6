// The argument of the cpu block kernels (see block_kernels.hpp). Kept free of any standard
// library header but <cstdint>: it is included by files compiled for AVX2 / AVX-512, whose
// inline functions must never be picked by the linker for code that runs on other CPUs.
#pragma once

#include <cstdint>

namespace blockmm::kernels::cpu {

// For f in [0, count): if s = slot[b_col[f]] >= 0, C_s = saturate(C_s + A x B_f), where C_s is
// the m x m uint32 accumulator at acc + s * acc_stride and B_f the block at b_values + f*m*m
// (all row-major). The accumulators hold values already saturated (exact: every term is
// non-negative); acc_stride >= m*m lets them live in place in the output records. a_scratch
// has room for m*m uint64 values (the kernels widen A once there, for every B block).
struct BlockRowTask {
  std::uint32_t* acc;
  std::int64_t acc_stride;
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
BlockRowKernel avx2_planes_block_row_kernel(std::int32_t m);  // 2 <= m <= planes::kMaxBlock
BlockRowKernel avx512_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_ifma_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_planes_block_row_kernel(std::int32_t m);  // 2 <= m <= planes::kMaxBlock
BlockRowKernel avx512_vnni_block_row_kernel(std::int32_t m);    // 2 <= m <= planes::kMaxBlock

}  // namespace blockmm::kernels::cpu
