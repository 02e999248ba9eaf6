// The vector block kernel, written once over a lane-traits type V and included only by the
// files compiled for one instruction set (block_row_avx2.cpp, block_row_avx512*.cpp).
//
// Exactness: lanes are 64 bits wide. A and B values are widened to uint64, so each product
// (< 2^32) and the sum over the m terms of one block product (< 64 * 2^32 = 2^38) are exact;
// that sum is then added to the tile's uint32 accumulator in 64 bits and saturated back to
// uint32 (V::flush). Saturating after every block product is exact because all terms are
// non-negative (core/saturate.hpp).
//
// Register blocking: up to 8 output rows of one column strip of V::lanes columns are
// accumulated in registers over the whole contraction; each B row strip is loaded (and
// widened) once per group, each A value is a broadcast from the widened copy of A that is
// made once per A block and reused for every B block of the B row.
//
// V must be declared in an anonymous namespace of the including file: the instantiations then
// have internal linkage, so the linker can never mix ISA-specific code into other callers.
#pragma once

#include <cstdint>

#include "kernels/cpu/block_row_task.hpp"

namespace blockmm::kernels::cpu::simd {

// Rows [r, r + G) of columns [col0, col0 + n) of C += A x B.
template <class V, int G>
__attribute__((always_inline)) inline void row_group(std::uint32_t* c, const std::uint64_t* a64,
                                                     const std::uint16_t* b, int m, int r, int col0, int n) {
  typename V::reg acc[G];
  for (int g = 0; g < G; ++g) acc[g] = V::zero();
  for (int l = 0; l < m; ++l) {
    const typename V::reg bl = V::load_b(b + l * m + col0, n);
    for (int g = 0; g < G; ++g) acc[g] = V::madd(acc[g], V::broadcast(a64 + (r + g) * m + l), bl);
  }
  for (int g = 0; g < G; ++g) V::flush(c + (r + g) * m + col0, acc[g], n);
}

// C = saturate(C + A x B) for one block pair; M is m, or 0 when known only at run time.
template <class V, int M>
__attribute__((always_inline)) inline void block_product(std::uint32_t* c, const std::uint64_t* a64,
                                                         const std::uint16_t* b, int m_runtime) {
  const int m = M > 0 ? M : m_runtime;
  for (int col0 = 0; col0 < m; col0 += V::lanes) {
    const int n = m - col0 < V::lanes ? m - col0 : V::lanes;
    int r = 0;
    for (; r + 8 <= m; r += 8) row_group<V, 8>(c, a64, b, m, r, col0, n);
    if (m - r >= 4) {
      row_group<V, 4>(c, a64, b, m, r, col0, n);
      r += 4;
    }
    if (m - r >= 2) {
      row_group<V, 2>(c, a64, b, m, r, col0, n);
      r += 2;
    }
    if (m - r >= 1) row_group<V, 1>(c, a64, b, m, r, col0, n);
  }
}

template <class V, int M>
void block_row(const BlockRowTask& task) {
  const int m = M > 0 ? M : task.m;
  const std::int64_t mm = std::int64_t{m} * m;
  for (std::int64_t q = 0; q < mm; ++q) task.a_scratch[q] = task.a[q];
  const std::uint16_t* b = task.b_values;
  for (std::int64_t f = 0; f < task.count; ++f, b += mm) {
    const std::int32_t s = task.slot[task.b_col[f]];
    if (s < 0) continue;  // no output tile here (the masks of this pair are disjoint)
    block_product<V, M>(task.acc + s * task.acc_stride, task.a_scratch, b, m);
  }
}

// Compile-time block sizes for the common m (full unrolling); the rest run with m at run time.
template <class V>
BlockRowKernel block_row_table(std::int32_t m) {
  switch (m) {
    case 2: return block_row<V, 2>;
    case 3: return block_row<V, 3>;
    case 4: return block_row<V, 4>;
    case 8: return block_row<V, 8>;
    case 16: return block_row<V, 16>;
    case 32: return block_row<V, 32>;
    default: return block_row<V, 0>;
  }
}

}  // namespace blockmm::kernels::cpu::simd
