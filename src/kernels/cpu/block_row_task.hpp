// The argument of the cpu block kernels (see block_kernels.hpp). Kept free of any standard
// library header but <cstdint>: it is included by files compiled for AVX2 / AVX-512, whose
// inline functions must never be picked by the linker for code that runs on other CPUs.
#pragma once

#include <cstdint>

namespace blockmm::kernels::cpu {

// A vector load that passes an array's end but stays in its page reads nothing it may not, and
// spares the kernels a masked load (slow behind the accumulators' stores); what it reads past
// the array lands in lanes the kernels clear or ignore. AddressSanitizer checks every byte of a
// load against the allocation, so under it every such load takes the masked form.
#if defined(__SANITIZE_ADDRESS__)
#define BLOCKMM_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKMM_ADDRESS_SANITIZER 1
#endif
#endif
#if defined(BLOCKMM_ADDRESS_SANITIZER)
inline bool load_stays_in_page(const void*, int) { return false; }
#else
inline bool load_stays_in_page(const void* p, int bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) & 4095) <= static_cast<std::uintptr_t>(4096 - bytes);
}
#endif

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

// A whole output row at once, for the small-block kernels (block_kernels.hpp, row_kernel): for
// each A block e in [0, a_count) (values at a_values + e*m*m, block-column a_col[e]) whose B row
// k = a_col[e] - b_row_begin is held (0 <= k < b_rows), its products with B row k (CSR: b_row_ptr,
// b_col, b_values) as in BlockRowTask. The accumulator is 64-byte aligned at the kernel's padded
// stride (padded_accumulator_stride).
struct RowTask {
  std::uint32_t* acc;
  std::int64_t acc_stride;
  const std::uint16_t* a_values;
  const std::int32_t* a_col;
  std::int64_t a_count;
  const std::int64_t* b_row_ptr;
  const std::int32_t* b_col;
  const std::uint16_t* b_values;
  std::int32_t b_row_begin;
  std::int32_t b_rows;
  const std::int32_t* slot;
};
using RowKernel = void (*)(const RowTask& task);

// The per-level tables, defined in block_row_*.cpp (the x86 ones only in x86 builds).
BlockRowKernel portable_block_row_kernel(std::int32_t m);
BlockRowKernel avx2_block_row_kernel(std::int32_t m);
BlockRowKernel avx2_planes_block_row_kernel(std::int32_t m);  // 2 <= m <= planes::kMaxBlock
BlockRowKernel avx512_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_ifma_block_row_kernel(std::int32_t m);
BlockRowKernel avx512_planes_block_row_kernel(std::int32_t m);  // 2 <= m <= planes::kMaxBlock
BlockRowKernel avx512_vnni_block_row_kernel(std::int32_t m);    // 2 <= m <= planes::kMaxBlock
RowKernel avx512_planes_row_kernel(std::int32_t m);  // null where m has no row kernel
RowKernel avx512_vnni_row_kernel(std::int32_t m);
BlockRowKernel avx512_planes_padded_kernel(std::int32_t m);  // null where m has no padded form
BlockRowKernel avx512_vnni_padded_kernel(std::int32_t m);

}  // namespace blockmm::kernels::cpu
