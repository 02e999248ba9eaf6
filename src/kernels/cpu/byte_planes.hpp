// The byte-plane form of a block product, shared by the kernels that multiply 16-bit integers
// with pairwise-summing instructions (AVX2 vpmaddwd, AVX-512 VNNI vpdpwssd). Those take signed
// 16-bit lanes and add two neighbouring products into one signed 32-bit lane, so uint16 values
// cannot go in as they are. Instead:
//   - A is split into its low and high bytes (planes, 0..255, exact as int16);
//   - B goes in offset by 2^15 (b - 32768, an int16), and the offset comes back out through the
//     row sums of the A planes: sum_l a(r,l) b(l,c) = sum_l a(r,l) (b(l,c) - 2^15) + 2^15 S(r);
//   - pairs of neighbouring l are the instruction's pairs: lane c of one instruction adds
//     a(r,2p) b(2p,c) + a(r,2p+1) b(2p+1,c).
// Bounds (why int32 is exact): |plane x offset B| <= 255 * 2^15 < 2^23, so the m-term sums of
// one plane stay inside int32 for m < 256, and the corrected plane sums
// L(r,c) = sum_l lo(a(r,l)) b(l,c) and H(r,c) likewise are in [0, 255 (2^16 - 1) m] < 2^31 for
// m <= 128. The product is then 256 H + L, added to the uint32 accumulator with saturation.
//
// One plane where an A block is narrow: when every value of the A block is at most
// one_plane_limit(m), A goes in whole (a < 2^15 is exact as int16) and there is no high plane,
// half the multiply-adds. Bounds: a pair's two products are each within 2^15 * 2^15, so the
// pair sum fits int32 (vpmaddwd and vpdpwssd are exact); the chain and the correction add modulo
// 2^32 (vpaddd, vpdpwssd without saturation), and the true corrected sum
// L(r,c) = sum_l a(r,l) b(l,c) <= m X (2^16 - 1) <= 2^32 - 1 for X <= (2^32 - 1) / (65535 m)
// = 65537 / m, so the sum modulo 2^32 is L itself, an exact uint32.
// This header is plain C++: the preparation of A runs once per A block (the kernels reuse it
// for every B block of the row).
#pragma once

#include <cstdint>

namespace blockmm::kernels::cpu::planes {

// The largest m the byte-plane kernels take (their stack holds one prepared B block).
inline constexpr std::int32_t kMaxBlock = 64;

inline constexpr std::int32_t pairs(std::int32_t m) { return (m + 1) / 2; }

// The largest value of an A block that the one-plane form takes for block size m (see above).
inline constexpr std::uint32_t one_plane_limit(std::int32_t m) {
  return 65537u / static_cast<std::uint32_t>(m) < 32767u ? 65537u / static_cast<std::uint32_t>(m) : 32767u;
}

// A prepared, in 32-bit words: lo[r * P + p] = lo(a(r,2p)) | lo(a(r,2p+1)) << 16 (the second
// 0 past m), hi likewise with the high bytes, then the per-row offset corrections
// 2^15 * sum_l lo(a(r,l)) and 2^15 * sum_l hi(a(r,l)) (both < 2^31 for m <= 128). In the
// one-plane form (one_plane) lo holds the whole values, correction_lo is 2^15 * sum_l a(r,l)
// modulo 2^32, and hi and correction_hi are not used.
struct PreparedA {
  const std::uint32_t* lo;
  const std::uint32_t* hi;
  const std::uint32_t* correction_lo;
  const std::uint32_t* correction_hi;
  bool one_plane;
};

// Words of scratch prepare_a needs: 2 m P + 2 m <= 2 m^2 for m >= 2, so the kernels' m*m
// uint64 scratch always has room.
inline constexpr std::int64_t prepared_words(std::int32_t m) {
  return 2 * std::int64_t{m} * pairs(m) + 2 * std::int64_t{m};
}

inline PreparedA prepare_a(const std::uint16_t* a, std::int32_t m, std::uint32_t* words) {
  const std::int32_t p_count = pairs(m);
  std::uint32_t* lo = words;
  std::uint32_t* hi = lo + std::int64_t{m} * p_count;
  std::uint32_t* correction_lo = hi + std::int64_t{m} * p_count;
  std::uint32_t* correction_hi = correction_lo + m;
  std::uint32_t largest = 0;
  for (std::int64_t q = 0; q < std::int64_t{m} * m; ++q) largest = a[q] > largest ? a[q] : largest;
  if (largest <= one_plane_limit(m)) {
    for (std::int32_t r = 0; r < m; ++r) {
      const std::uint16_t* row = a + std::int64_t{r} * m;
      std::uint32_t sum = 0;
      for (std::int32_t p = 0; p < p_count; ++p) {
        const std::uint32_t first = row[2 * p];
        const std::uint32_t second = 2 * p + 1 < m ? row[2 * p + 1] : 0;
        lo[r * p_count + p] = first | second << 16;
        sum += first + second;
      }
      correction_lo[r] = sum * 32768u;  // modulo 2^32, as the lanes add
    }
    return {lo, hi, correction_lo, correction_hi, true};
  }
  for (std::int32_t r = 0; r < m; ++r) {
    const std::uint16_t* row = a + std::int64_t{r} * m;
    std::uint32_t sum_lo = 0, sum_hi = 0;
    for (std::int32_t p = 0; p < p_count; ++p) {
      const std::uint32_t first = row[2 * p];
      const std::uint32_t second = 2 * p + 1 < m ? row[2 * p + 1] : 0;
      lo[r * p_count + p] = (first & 0xFFu) | (second & 0xFFu) << 16;
      hi[r * p_count + p] = first >> 8 | (second >> 8) << 16;
      sum_lo += (first & 0xFFu) + (second & 0xFFu);
      sum_hi += (first >> 8) + (second >> 8);
    }
    correction_lo[r] = sum_lo * 32768u;
    correction_hi[r] = sum_hi * 32768u;
  }
  return {lo, hi, correction_lo, correction_hi, false};
}

}  // namespace blockmm::kernels::cpu::planes
