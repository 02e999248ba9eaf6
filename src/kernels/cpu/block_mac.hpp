// C += A x B for one m x m block pair, with saturating uint32 accumulators (exact: see
// core/saturate.hpp). Instantiated for the common block sizes so that the inner loop has a
// compile-time trip count and vectorises.
#pragma once

#include <cstdint>

#include "core/saturate.hpp"

namespace blockmm::kernels::cpu {

template <int M>
inline void block_mac_fixed(std::uint32_t* __restrict c, const std::uint16_t* __restrict a,
                            const std::uint16_t* __restrict b) {
  for (int r = 0; r < M; ++r) {
    for (int l = 0; l < M; ++l) {
      const std::uint32_t av = a[r * M + l];
      for (int col = 0; col < M; ++col) {
        const std::uint32_t sum = c[r * M + col] + av * b[l * M + col];
        c[r * M + col] = sum < c[r * M + col] ? kSaturated : sum;
      }
    }
  }
}

inline void block_mac_any(std::uint32_t* __restrict c, const std::uint16_t* __restrict a,
                          const std::uint16_t* __restrict b, int m) {
  for (int r = 0; r < m; ++r) {
    for (int l = 0; l < m; ++l) {
      const std::uint32_t av = a[r * m + l];
      if (av == 0) continue;
      for (int col = 0; col < m; ++col) c[r * m + col] = saturating_add(c[r * m + col], av * b[l * m + col]);
    }
  }
}

}  // namespace blockmm::kernels::cpu
