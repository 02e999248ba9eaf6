// The AVX2 block kernel: 4 uint64 lanes a ymm register (this file is compiled with -mavx2).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/simd_block_row.hpp"

namespace blockmm::kernels::cpu {
namespace {

struct Avx2Lanes {
  using reg = __m256i;
  static constexpr int lanes = 4;

  static reg zero() { return _mm256_setzero_si256(); }
  static reg broadcast(const std::uint64_t* p) { return _mm256_set1_epi64x(static_cast<long long>(*p)); }

  // B[l, col0 .. col0 + n) widened; AVX2 has no 16-bit masked load, so a short strip goes
  // through a zeroed copy (never reading past the block).
  static reg load_b(const std::uint16_t* p, int n) {
    if (n == 4) return _mm256_cvtepu16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    std::uint16_t strip[8] = {};
    std::memcpy(strip, p, static_cast<std::size_t>(n) * sizeof *p);
    return _mm256_cvtepu16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(strip)));
  }

  // acc * b exactly: both < 2^16, and vpmuludq multiplies the low 32 bits of each lane.
  static reg madd(reg acc, reg a, reg b) { return _mm256_add_epi64(acc, _mm256_mul_epu32(a, b)); }

  // c[0 .. n) = min(c + sum, 2^32 - 1). The sums stay below 2^40, so a signed compare finds
  // the lanes over 2^32 - 1; OR-ing the all-ones compare mask saturates them.
  static void flush(std::uint32_t* c, reg sum, int n) {
    std::uint32_t strip[4] = {};
    const std::uint32_t* src = c;
    if (n < 4) {
      std::memcpy(strip, c, static_cast<std::size_t>(n) * sizeof *c);
      src = strip;
    }
    reg total = _mm256_add_epi64(_mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))), sum);
    total = _mm256_or_si256(total, _mm256_cmpgt_epi64(total, _mm256_set1_epi64x(0xFFFFFFFFll)));
    const __m128i low = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(total, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    if (n == 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c), low);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(strip), low);
      std::memcpy(c, strip, static_cast<std::size_t>(n) * sizeof *c);
    }
  }
};

}  // namespace

BlockRowKernel avx2_block_row_kernel(std::int32_t m) { return simd::block_row_table<Avx2Lanes>(m); }

}  // namespace blockmm::kernels::cpu
