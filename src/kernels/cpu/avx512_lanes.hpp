// Lane traits of the AVX-512 block kernels (simd_block_row.hpp), with or without IFMA's
// 52-bit multiply-add. Included only by block_row_avx512.cpp and block_row_avx512_ifma.cpp,
// which are compiled for AVX-512 F/BW/VL (and IFMA); the anonymous namespace keeps every
// instantiation private to that file.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace blockmm::kernels::cpu {
namespace {

inline __mmask8 first_lanes(int n) { return static_cast<__mmask8>((1u << n) - 1); }

// 8 uint64 lanes a zmm register: for m > 4.
template <bool Ifma>
struct ZmmLanes {
  using reg = __m512i;
  static constexpr int lanes = 8;

  static reg zero() { return _mm512_setzero_si512(); }
  static reg broadcast(const std::uint64_t* p) { return _mm512_set1_epi64(static_cast<long long>(*p)); }
  static reg load_b(const std::uint16_t* p, int n) {
    const __m128i v = n == 8 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi16(first_lanes(n), p);
    return _mm512_cvtepu16_epi64(v);
  }
  // Exact: the product of two values < 2^16 is < 2^32, far inside IFMA's 52 bits, and the
  // accumulation is a full 64-bit add in both forms.
  static reg madd(reg acc, reg a, reg b) {
    if constexpr (Ifma)
      return _mm512_madd52lo_epu64(acc, a, b);
    else
      return _mm512_add_epi64(acc, _mm512_mul_epu32(a, b));
  }
  // c[0 .. n) = min(c + sum, 2^32 - 1): vpmovusqd narrows with unsigned saturation.
  static void flush(std::uint32_t* c, reg sum, int n) {
    if (n == 8) {
      const reg cur = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), _mm512_cvtusepi64_epi32(_mm512_add_epi64(cur, sum)));
    } else {
      const reg cur = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(first_lanes(n), c));
      _mm512_mask_cvtusepi64_storeu_epi32(c, first_lanes(n), _mm512_add_epi64(cur, sum));
    }
  }
};

// 4 uint64 lanes a ymm register (AVX-512VL forms): for m <= 4, where 8 lanes would be half empty.
template <bool Ifma>
struct YmmLanes {
  using reg = __m256i;
  static constexpr int lanes = 4;

  static reg zero() { return _mm256_setzero_si256(); }
  static reg broadcast(const std::uint64_t* p) { return _mm256_set1_epi64x(static_cast<long long>(*p)); }
  static reg load_b(const std::uint16_t* p, int n) {
    const __m128i v = n == 4 ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi16(first_lanes(n), p);
    return _mm256_cvtepu16_epi64(v);
  }
  static reg madd(reg acc, reg a, reg b) {
    if constexpr (Ifma)
      return _mm256_madd52lo_epu64(acc, a, b);
    else
      return _mm256_add_epi64(acc, _mm256_mul_epu32(a, b));
  }
  static void flush(std::uint32_t* c, reg sum, int n) {
    if (n == 4) {
      const reg cur = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c), _mm256_cvtusepi64_epi32(_mm256_add_epi64(cur, sum)));
    } else {
      const reg cur = _mm256_cvtepu32_epi64(_mm_maskz_loadu_epi32(first_lanes(n), c));
      _mm256_mask_cvtusepi64_storeu_epi32(c, first_lanes(n), _mm256_add_epi64(cur, sum));
    }
  }
};

}  // namespace
}  // namespace blockmm::kernels::cpu
