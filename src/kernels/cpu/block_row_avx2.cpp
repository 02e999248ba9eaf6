// The AVX2 block kernels (this file is compiled with -mavx2): the widened form (4 uint64 lanes a
// ymm register, simd_block_row.hpp) and the byte-plane form (byte_planes.hpp: 16 int16 pairs a
// vpmaddwd, 8 useful multiply-adds an instruction against the widened form's 4 a vpmuludq +
// vpaddq pair; one vpmaddwd chain instead of two where an A block is narrow).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/byte_planes.hpp"
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

// The byte-plane kernel: lanes are 8 output columns, int32 sums of one A plane.
namespace planes_avx2 {

using planes::PreparedA;

// Up to 8 values of one B row (n of them; the rest zero), never reading past them.
inline __m128i load_row(const std::uint16_t* p, int n) {
  if (n == 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  std::uint16_t strip[8] = {};
  std::memcpy(strip, p, static_cast<std::size_t>(n) * sizeof *p);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(strip));
}

// The strips of a tile's columns: 8 columns a ymm register, a last strip of 4 in an xmm register
// (no masking: AMD's masked stores are slow), and any other remainder in a masked ymm register.
// Each holds, per B pair p, lane c = (b(2p,c) - 2^15, b(2p+1,c) - 2^15): rows 2p and 2p + 1
// (a zero row past m) interleaved into the pairs vpmaddwd adds, offset into int16.
struct Ymm {
  using reg = __m256i;
  static reg set1(std::uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static reg madd_add(reg acc, reg a, reg b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  static reg b_pair(const std::uint16_t* b, int m, int p, int col0, int n) {
    const __m128i first = load_row(b + (2 * p) * m + col0, n);
    const __m128i second = 2 * p + 1 < m ? load_row(b + (2 * p + 1) * m + col0, n) : _mm_setzero_si128();
    const __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi16(first, second), _mm_unpacklo_epi16(first, second));
    return _mm256_xor_si256(pairs, _mm256_set1_epi16(static_cast<short>(0x8000)));
  }
  // c[0 .. n) = min(c + 256 hi + lo, 2^32 - 1) for the corrected plane sums hi, lo in
  // [0, 2^31): 256 hi is formed only below 2^32 (above, the lane saturates), and each unsigned
  // add x + y is x + min(y, ~x), which is x + y or exactly 2^32 - 1.
  static void flush(std::uint32_t* c, reg hi, reg lo, int n) {
    const reg ones = _mm256_set1_epi32(-1);
    const reg limit = _mm256_set1_epi32(0x00FFFFFF);
    reg t = _mm256_slli_epi32(_mm256_min_epu32(hi, limit), 8);
    t = _mm256_add_epi32(t, _mm256_min_epu32(lo, _mm256_xor_si256(t, ones)));
    flush(c, _mm256_or_si256(t, _mm256_cmpgt_epi32(hi, limit)), n);
  }
  // c[0 .. n) = min(c + sum, 2^32 - 1) for uint32 sums (the one-plane form's, or the above's).
  static void flush(std::uint32_t* c, reg sum, int n) {
    const reg ones = _mm256_set1_epi32(-1);
    if (n == 8) {
      const reg cur = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), _mm256_add_epi32(cur, _mm256_min_epu32(sum, _mm256_xor_si256(cur, ones))));
    } else {
      const reg mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const reg cur = _mm256_maskload_epi32(reinterpret_cast<const int*>(c), mask);
      _mm256_maskstore_epi32(reinterpret_cast<int*>(c), mask, _mm256_add_epi32(cur, _mm256_min_epu32(sum, _mm256_xor_si256(cur, ones))));
    }
  }
};

struct Xmm4 {
  using reg = __m128i;
  static reg set1(std::uint32_t x) { return _mm_set1_epi32(static_cast<int>(x)); }
  static reg madd_add(reg acc, reg a, reg b) { return _mm_add_epi32(acc, _mm_madd_epi16(a, b)); }
  static reg b_pair(const std::uint16_t* b, int m, int p, int col0, int) {
    const __m128i first = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + (2 * p) * m + col0));
    const __m128i second = 2 * p + 1 < m ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + (2 * p + 1) * m + col0))
                                         : _mm_setzero_si128();
    return _mm_xor_si128(_mm_unpacklo_epi16(first, second), _mm_set1_epi16(static_cast<short>(0x8000)));
  }
  static void flush(std::uint32_t* c, reg hi, reg lo, int n) {  // as Ymm's, 4 lanes
    const reg ones = _mm_set1_epi32(-1);
    const reg limit = _mm_set1_epi32(0x00FFFFFF);
    reg t = _mm_slli_epi32(_mm_min_epu32(hi, limit), 8);
    t = _mm_add_epi32(t, _mm_min_epu32(lo, _mm_xor_si128(t, ones)));
    flush(c, _mm_or_si128(t, _mm_cmpgt_epi32(hi, limit)), n);
  }
  static void flush(std::uint32_t* c, reg sum, int) {
    const reg cur = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c), _mm_add_epi32(cur, _mm_min_epu32(sum, _mm_xor_si128(cur, _mm_set1_epi32(-1)))));
  }
};

// Columns [col0, col0 + n) of C += A x B (n <= 8, the strip's width), row by row: the strip's B
// pairs are prepared once, then each row is a chain of vpmaddwd per A plane (one or two).
template <class S, bool OnePlane>
__attribute__((always_inline)) inline void strip_product(std::uint32_t* c, const PreparedA& a, const std::uint16_t* b,
                                                         int m, int p_count, int col0, int n) {
  typename S::reg b_pairs[planes::pairs(planes::kMaxBlock)];
  for (int p = 0; p < p_count; ++p) b_pairs[p] = S::b_pair(b, m, p, col0, n);
  for (int r = 0; r < m; ++r) {
    typename S::reg lo = S::set1(a.correction_lo[r]);
    if constexpr (OnePlane) {
      for (int p = 0; p < p_count; ++p) lo = S::madd_add(lo, S::set1(a.lo[r * p_count + p]), b_pairs[p]);
      S::flush(c + r * m + col0, lo, n);
    } else {
      typename S::reg hi = S::set1(a.correction_hi[r]);
      for (int p = 0; p < p_count; ++p) {
        lo = S::madd_add(lo, S::set1(a.lo[r * p_count + p]), b_pairs[p]);
        hi = S::madd_add(hi, S::set1(a.hi[r * p_count + p]), b_pairs[p]);
      }
      S::flush(c + r * m + col0, hi, lo, n);
    }
  }
}

constexpr std::int64_t kPrefetchAhead = 4;

inline void prefetch_range(const void* p, std::int64_t bytes) {
  const char* first = static_cast<const char*>(p);
  for (std::int64_t at = 0; at < bytes; at += 64) _mm_prefetch(first + at, _MM_HINT_T0);
}

// Each form in a function of its own (as in avx512_planes.hpp), A's pointers a local copy.
template <int M, bool OnePlane>
__attribute__((noinline)) void block_row_products(const BlockRowTask& task, const PreparedA a) {
  const int m = M > 0 ? M : task.m;
  const int p_count = planes::pairs(m);
  const int full_strips = m / 8;
  const int rest = m % 8;
  const std::int64_t mm = std::int64_t{m} * m;
  const std::uint16_t* b = task.b_values;
  for (std::int64_t f = 0; f < task.count; ++f, b += mm) {
    const std::int32_t slot = task.slot[task.b_col[f]];
    // The B blocks and tiles of a few products ahead: B streams from L3 and the tiles of a row
    // are spread over a chunk, and a block product is short enough that their misses showed.
    if (f + kPrefetchAhead < task.count) {
      prefetch_range(b + kPrefetchAhead * mm, mm * 2);
      const std::int32_t ahead = task.slot[task.b_col[f + kPrefetchAhead]];
      if (ahead >= 0) prefetch_range(task.acc + ahead * task.acc_stride, mm * 4);
    }
    if (slot < 0) continue;  // no output tile here (the masks of this pair are disjoint)
    std::uint32_t* c = task.acc + slot * task.acc_stride;
    for (int s = 0; s < full_strips; ++s) strip_product<Ymm, OnePlane>(c, a, b, m, p_count, 8 * s, 8);
    if (rest == 4)
      strip_product<Xmm4, OnePlane>(c, a, b, m, p_count, 8 * full_strips, 4);
    else if (rest > 0)
      strip_product<Ymm, OnePlane>(c, a, b, m, p_count, 8 * full_strips, rest);
  }
}

template <int M>
void block_row(const BlockRowTask& task) {
  const int m = M > 0 ? M : task.m;
  const PreparedA a = planes::prepare_a(task.a, m, reinterpret_cast<std::uint32_t*>(task.a_scratch));
  if (a.one_plane)
    block_row_products<M, true>(task, a);
  else
    block_row_products<M, false>(task, a);
}

// m = 4: one register holds two rows of a tile (8 lanes = rows 2q and 2q + 1, 4 columns each,
// contiguous in the record), so nothing is half empty or masked. A is prepared per A block into
// registers' worth of lane-wise broadcasts: lanes 0-3 row 2q's pair p, lanes 4-7 row 2q + 1's.
template <bool OnePlane>
__attribute__((noinline)) void block_row_4_products(const BlockRowTask& task, const PreparedA a) {
  constexpr int m = 4;
  const auto rows_of = [](std::uint32_t first, std::uint32_t second) {
    return _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(second)), _mm_set1_epi32(static_cast<int>(first)));
  };
  __m256i a_lo[2][2], a_hi[2][OnePlane ? 1 : 2], correction_lo[2], correction_hi[OnePlane ? 1 : 2];  // [row pair][pair]
  for (int q = 0; q < 2; ++q) {
    for (int p = 0; p < 2; ++p) {
      a_lo[q][p] = rows_of(a.lo[(2 * q) * 2 + p], a.lo[(2 * q + 1) * 2 + p]);
      if constexpr (!OnePlane) a_hi[q][p] = rows_of(a.hi[(2 * q) * 2 + p], a.hi[(2 * q + 1) * 2 + p]);
    }
    correction_lo[q] = rows_of(a.correction_lo[2 * q], a.correction_lo[2 * q + 1]);
    if constexpr (!OnePlane) correction_hi[q] = rows_of(a.correction_hi[2 * q], a.correction_hi[2 * q + 1]);
  }
  // Within each 128-bit lane (rows 2p, 2p + 1 of B), interleave the two rows' 16-bit values.
  const __m256i interleave = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                                              0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  const __m256i offset = _mm256_set1_epi16(static_cast<short>(0x8000));
  const std::uint16_t* b = task.b_values;
  for (std::int64_t f = 0; f < task.count; ++f, b += m * m) {
    const std::int32_t slot = task.slot[task.b_col[f]];
    if (f + kPrefetchAhead < task.count) {
      _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchAhead * m * m), _MM_HINT_T0);
      const std::int32_t ahead = task.slot[task.b_col[f + kPrefetchAhead]];
      if (ahead >= 0) prefetch_range(task.acc + ahead * task.acc_stride, m * m * 4);
    }
    if (slot < 0) continue;  // no output tile here (the masks of this pair are disjoint)
    const __m256i rows = _mm256_xor_si256(
        _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), interleave), offset);
    const __m256i pair0 = _mm256_permute4x64_epi64(rows, 0x44);  // rows 0, 1 in both lanes
    const __m256i pair1 = _mm256_permute4x64_epi64(rows, 0xEE);  // rows 2, 3
    std::uint32_t* c = task.acc + slot * task.acc_stride;
    for (int q = 0; q < 2; ++q) {
      const __m256i lo = _mm256_add_epi32(_mm256_add_epi32(correction_lo[q], _mm256_madd_epi16(a_lo[q][0], pair0)),
                                          _mm256_madd_epi16(a_lo[q][1], pair1));
      if constexpr (OnePlane) {
        Ymm::flush(c + 8 * q, lo, 8);
      } else {
        const __m256i hi = _mm256_add_epi32(_mm256_add_epi32(correction_hi[q], _mm256_madd_epi16(a_hi[q][0], pair0)),
                                            _mm256_madd_epi16(a_hi[q][1], pair1));
        Ymm::flush(c + 8 * q, hi, lo, 8);
      }
    }
  }
}

void block_row_4(const BlockRowTask& task) {
  alignas(32) std::uint32_t words[planes::prepared_words(4)];
  const PreparedA a = planes::prepare_a(task.a, 4, words);
  if (a.one_plane)
    block_row_4_products<true>(task, a);
  else
    block_row_4_products<false>(task, a);
}

}  // namespace planes_avx2

}  // namespace

BlockRowKernel avx2_block_row_kernel(std::int32_t m) { return simd::block_row_table<Avx2Lanes>(m); }

BlockRowKernel avx2_planes_block_row_kernel(std::int32_t m) {
  switch (m) {
    case 2: return planes_avx2::block_row<2>;
    case 4: return planes_avx2::block_row_4;
    case 8: return planes_avx2::block_row<8>;
    case 16: return planes_avx2::block_row<16>;
    case 32: return planes_avx2::block_row<32>;
    default: return planes_avx2::block_row<0>;
  }
}

}  // namespace blockmm::kernels::cpu
