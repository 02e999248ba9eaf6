// Exact saturating arithmetic of the product: c = min(sum of a*b, 2^32 - 1).
// All terms are non-negative, so saturating any partial sum early gives the same result; a
// saturating uint32 add is therefore exact.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BLOCKMM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define BLOCKMM_HOST_DEVICE inline
#endif

namespace blockmm {

constexpr std::uint32_t kSaturated = 0xFFFFFFFFu;

BLOCKMM_HOST_DEVICE std::uint32_t saturating_add(std::uint32_t x, std::uint32_t y) {
  const std::uint32_t sum = x + y;
  return sum < x ? kSaturated : sum;
}

BLOCKMM_HOST_DEVICE std::uint32_t saturate(std::uint64_t x) {
  return x > kSaturated ? kSaturated : static_cast<std::uint32_t>(x);
}

// (2^16 - 1)^2 < 2^32: one product always fits in uint32.
BLOCKMM_HOST_DEVICE std::uint32_t product(std::uint16_t a, std::uint16_t b) {
  return static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b);
}

}  // namespace blockmm
