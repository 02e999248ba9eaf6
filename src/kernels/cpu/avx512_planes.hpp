// The byte-plane block kernels (byte_planes.hpp) on AVX-512 BW, with VNNI's vpdpwssd (one
// instruction a 32-pair multiply-add into 16 int32 lanes) or without it (vpmaddwd + vpaddd).
// Included only by block_row_avx512_planes.cpp and block_row_avx512_vnni.cpp, compiled for
// their instruction sets; the anonymous namespace keeps every instantiation private to its file.
// Layouts: m = 4 holds a whole tile in one register, m = 8 two tile rows, m = 2, 3, 5, 6, 7 a
// tile in the lanes of one to four registers (avx512_tile_lanes.hpp); other m run in strips of 16
// columns (the last one masked), or into a padded accumulator over the A block's non-zero rows
// and columns only (avx512_row_strips.hpp).
// Each kernel runs the one-plane form for an A block narrow enough (byte_planes.hpp), the two
// byte planes otherwise.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/avx512_row_strips.hpp"
#include "kernels/cpu/avx512_tile_lanes.hpp"
#include "kernels/cpu/block_row_task.hpp"
#include "kernels/cpu/byte_planes.hpp"

namespace blockmm::kernels::cpu {
namespace {

template <bool Vnni>
struct Planes512 {
  using PreparedA = planes::PreparedA;
  static constexpr bool kVnni = Vnni;
  static constexpr std::int64_t kPrefetchAhead = 4;

  static __m512i madd_add(__m512i acc, __m512i a, __m512i b) {
    if constexpr (Vnni)
      return _mm512_dpwssd_epi32(acc, a, b);
    else
      return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }

  // c[k lanes] = min(c + 256 hi + lo, 2^32 - 1) for corrected plane sums hi, lo in [0, 2^31);
  // the same steps as the AVX2 form (block_row_avx2.cpp), with a mask compare for the lanes
  // whose 256 hi alone passes 2^32 - 1.
  static void flush(std::uint32_t* c, __m512i hi, __m512i lo, __mmask16 k) { flush(c, combine(hi, lo), k); }
  // min(256 hi + lo, 2^32 - 1), lane by lane.
  static __m512i combine(__m512i hi, __m512i lo) {
    const __m512i ones = _mm512_set1_epi32(-1);
    const __m512i limit = _mm512_set1_epi32(0x00FFFFFF);
    __m512i t = _mm512_slli_epi32(_mm512_min_epu32(hi, limit), 8);
    t = _mm512_add_epi32(t, _mm512_min_epu32(lo, _mm512_xor_si512(t, ones)));
    return _mm512_mask_mov_epi32(t, _mm512_cmpgt_epu32_mask(hi, limit), ones);
  }
  // c[k lanes] = min(c + sum, 2^32 - 1) for uint32 sums (the one-plane form's, or the above's).
  static void flush(std::uint32_t* c, __m512i sum, __mmask16 k) {
    const __m512i cur = _mm512_maskz_loadu_epi32(k, c);
    _mm512_mask_storeu_epi32(c, k, _mm512_add_epi32(cur, _mm512_min_epu32(sum, _mm512_xor_si512(cur, _mm512_set1_epi32(-1)))));
  }

  static __m512i offset() { return _mm512_set1_epi16(static_cast<short>(0x8000)); }

  static void prefetch_range(const void* p, std::int64_t bytes) {
    const char* first = static_cast<const char*>(p);
    for (std::int64_t at = 0; at < bytes; at += 64) _mm_prefetch(first + at, _MM_HINT_T0);
  }

  // The B block and tile of the product kPrefetchAhead ahead (as in the AVX2 form).
  static void prefetch_ahead(const BlockRowTask& task, std::int64_t f, const std::uint16_t* b, std::int64_t mm) {
    if (f + kPrefetchAhead >= task.count) return;
    prefetch_range(b + kPrefetchAhead * mm, mm * 2);
    const std::int32_t ahead = task.slot[task.b_col[f + kPrefetchAhead]];
    if (ahead >= 0) prefetch_range(task.acc + ahead * task.acc_stride, mm * 4);
  }

  // Columns [col0, col0 + n) (n <= 16) of B rows 2p, 2p + 1 (zero past m), interleaved and
  // offset: lane c = (b(2p,c) - 2^15, b(2p+1,c) - 2^15).
  static __m512i b_pair16(const std::uint16_t* b, int m, int p, int col0, __mmask16 k) {
    const __m256i first = _mm256_maskz_loadu_epi16(k, b + (2 * p) * m + col0);
    const __m256i second = 2 * p + 1 < m ? _mm256_maskz_loadu_epi16(k, b + (2 * p + 1) * m + col0) : _mm256_setzero_si256();
    // Value c of the first row to lane word 2c, of the second to 2c + 1 (index 32 + c).
    const __m512i interleave = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                                39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i pairs = _mm512_permutex2var_epi16(_mm512_zextsi256_si512(first), interleave, _mm512_zextsi256_si512(second));
    return _mm512_xor_si512(pairs, offset());
  }

  // Any m in [2, kMaxBlock]: strips of 16 columns, row by row.
  template <bool OnePlane>
  __attribute__((noinline)) static void strip_products(const BlockRowTask& task, const PreparedA a) {
    const int m = task.m;
    const int p_count = planes::pairs(m);
    const std::int64_t mm = std::int64_t{m} * m;
    __m512i b_pairs[planes::pairs(planes::kMaxBlock)];
    const std::uint16_t* b = task.b_values;
    for (std::int64_t f = 0; f < task.count; ++f, b += mm) {
      const std::int32_t slot = task.slot[task.b_col[f]];
      prefetch_ahead(task, f, b, mm);
      if (slot < 0) continue;  // no output tile here (the masks of this pair are disjoint)
      std::uint32_t* c = task.acc + slot * task.acc_stride;
      for (int col0 = 0; col0 < m; col0 += 16) {
        const int n = m - col0 < 16 ? m - col0 : 16;
        const __mmask16 k = static_cast<__mmask16>((1u << n) - 1);
        for (int p = 0; p < p_count; ++p) b_pairs[p] = b_pair16(b, m, p, col0, k);
        for (int r = 0; r < m; ++r) {
          __m512i lo = _mm512_set1_epi32(static_cast<int>(a.correction_lo[r]));
          if constexpr (OnePlane) {
            for (int p = 0; p < p_count; ++p)
              lo = madd_add(lo, _mm512_set1_epi32(static_cast<int>(a.lo[r * p_count + p])), b_pairs[p]);
            flush(c + r * m + col0, lo, k);
          } else {
            __m512i hi = _mm512_set1_epi32(static_cast<int>(a.correction_hi[r]));
            for (int p = 0; p < p_count; ++p) {
              lo = madd_add(lo, _mm512_set1_epi32(static_cast<int>(a.lo[r * p_count + p])), b_pairs[p]);
              hi = madd_add(hi, _mm512_set1_epi32(static_cast<int>(a.hi[r * p_count + p])), b_pairs[p]);
            }
            flush(c + r * m + col0, hi, lo, k);
          }
        }
      }
    }
  }
  static void block_row_strips(const BlockRowTask& task) {
    const PreparedA a = planes::prepare_a(task.a, task.m, reinterpret_cast<std::uint32_t*>(task.a_scratch));
    if (a.one_plane)
      strip_products<true>(task, a);
    else
      strip_products<false>(task, a);
  }

  // m = 8: a register is tile rows 2q (lanes 0-7) and 2q + 1 (lanes 8-15); B's pair p (8 columns)
  // in both halves, A's pair values broadcast half by half (prepared once per A block). Each
  // form sets up its own registers in a function of its own: with the two forms' registers in
  // one struct handed to the loops, the two-plane form ran measurably slower on many threads.
  template <bool OnePlane>
  __attribute__((noinline)) static void products_8(const BlockRowTask& task, const PreparedA a) {
    constexpr int m = 8, pairs = 4, row_pairs = 4;
    const auto halves = [](std::uint32_t low, std::uint32_t high) {
      return _mm512_mask_set1_epi32(_mm512_set1_epi32(static_cast<int>(low)), 0xFF00, static_cast<int>(high));
    };
    __m512i a_lo[row_pairs][pairs], a_hi[row_pairs][OnePlane ? 1 : pairs], correction_lo[row_pairs],
        correction_hi[OnePlane ? 1 : row_pairs];
    for (int q = 0; q < row_pairs; ++q) {
      for (int p = 0; p < pairs; ++p) {
        a_lo[q][p] = halves(a.lo[2 * q * pairs + p], a.lo[(2 * q + 1) * pairs + p]);
        if constexpr (!OnePlane) a_hi[q][p] = halves(a.hi[2 * q * pairs + p], a.hi[(2 * q + 1) * pairs + p]);
      }
      correction_lo[q] = halves(a.correction_lo[2 * q], a.correction_lo[2 * q + 1]);
      if constexpr (!OnePlane) correction_hi[q] = halves(a.correction_hi[2 * q], a.correction_hi[2 * q + 1]);
    }
    // Rows 2p and 2p + 1 of B are 16 contiguous values: lane c of the pair = (value c, value 8 + c).
    const __m256i interleave = _mm256_set_epi16(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    const __m256i offset256 = _mm256_set1_epi16(static_cast<short>(0x8000));
    const std::uint16_t* b = task.b_values;
    for (std::int64_t f = 0; f < task.count; ++f, b += m * m) {
      const std::int32_t slot = task.slot[task.b_col[f]];
      prefetch_ahead(task, f, b, m * m);
      if (slot < 0) continue;
      __m512i b_pairs[pairs];
      for (int p = 0; p < pairs; ++p) {
        const __m256i rows = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2 * p * m));
        b_pairs[p] = _mm512_broadcast_i64x4(_mm256_xor_si256(_mm256_permutexvar_epi16(interleave, rows), offset256));
      }
      std::uint32_t* c = task.acc + slot * task.acc_stride;
      for (int q = 0; q < row_pairs; ++q) {
        __m512i lo = correction_lo[q];
        if constexpr (OnePlane) {
          for (int p = 0; p < pairs; ++p) lo = madd_add(lo, a_lo[q][p], b_pairs[p]);
          flush(c + 16 * q, lo, 0xFFFF);
        } else {
          __m512i hi = correction_hi[q];
          for (int p = 0; p < pairs; ++p) {
            lo = madd_add(lo, a_lo[q][p], b_pairs[p]);
            hi = madd_add(hi, a_hi[q][p], b_pairs[p]);
          }
          flush(c + 16 * q, hi, lo, 0xFFFF);
        }
      }
    }
  }
  static void block_row_8(const BlockRowTask& task) {
    alignas(64) std::uint32_t words[planes::prepared_words(8)];
    const PreparedA a = planes::prepare_a(task.a, 8, words);
    if (a.one_plane)
      products_8<true>(task, a);
    else
      products_8<false>(task, a);
  }

  // m = 4: the whole tile in one register (lanes 4r .. 4r + 3 = row r); B's pair p (4 columns)
  // in all four 128-bit lanes, A's pair values broadcast lane by lane.
  template <bool OnePlane>
  __attribute__((noinline)) static void products_4(const BlockRowTask& task, const PreparedA a) {
    constexpr int m = 4;
    __m512i a_lo[2], a_hi[2], correction_lo, correction_hi = _mm512_setzero_si512();
    alignas(64) std::uint32_t lanes[16];
    for (int p = 0; p < 2; ++p) {
      for (int q = 0; q < 16; ++q) lanes[q] = a.lo[(q / 4) * 2 + p];
      a_lo[p] = _mm512_load_si512(lanes);
      if constexpr (!OnePlane) {
        for (int q = 0; q < 16; ++q) lanes[q] = a.hi[(q / 4) * 2 + p];
        a_hi[p] = _mm512_load_si512(lanes);
      }
    }
    for (int q = 0; q < 16; ++q) lanes[q] = a.correction_lo[q / 4];
    correction_lo = _mm512_load_si512(lanes);
    if constexpr (!OnePlane) {
      for (int q = 0; q < 16; ++q) lanes[q] = a.correction_hi[q / 4];
      correction_hi = _mm512_load_si512(lanes);
    }
    // Within each 128-bit lane (B rows 2p, 2p + 1), interleave the two rows' values.
    const __m256i interleave = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                                                0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
    const __m256i offset256 = _mm256_set1_epi16(static_cast<short>(0x8000));
    const std::uint16_t* b = task.b_values;
    for (std::int64_t f = 0; f < task.count; ++f, b += m * m) {
      const std::int32_t slot = task.slot[task.b_col[f]];
      prefetch_ahead(task, f, b, m * m);
      if (slot < 0) continue;
      const __m256i rows = _mm256_xor_si256(
          _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), interleave), offset256);
      const __m512i pair0 = _mm512_broadcast_i32x4(_mm256_castsi256_si128(rows));
      const __m512i pair1 = _mm512_broadcast_i32x4(_mm256_extracti128_si256(rows, 1));
      const __m512i lo = madd_add(madd_add(correction_lo, a_lo[0], pair0), a_lo[1], pair1);
      if constexpr (OnePlane) {
        flush(task.acc + slot * task.acc_stride, lo, 0xFFFF);
      } else {
        const __m512i hi = madd_add(madd_add(correction_hi, a_hi[0], pair0), a_hi[1], pair1);
        flush(task.acc + slot * task.acc_stride, hi, lo, 0xFFFF);
      }
    }
  }
  static void block_row_4(const BlockRowTask& task) {
    alignas(64) std::uint32_t words[planes::prepared_words(4)];
    const PreparedA a = planes::prepare_a(task.a, 4, words);
    if (a.one_plane)
      products_4<true>(task, a);
    else
      products_4<false>(task, a);
  }

  static BlockRowKernel kernel(std::int32_t m) {
    switch (m) {
      case 2: return tile_lane_block_row<Planes512, 2>;
      case 3: return tile_lane_block_row<Planes512, 3>;
      case 4: return block_row_4;
      case 5: return tile_lane_block_row<Planes512, 5>;
      case 6: return tile_lane_block_row<Planes512, 6>;
      case 7: return tile_lane_block_row<Planes512, 7>;
      case 8: return block_row_8;
      default: return block_row_strips;
    }
  }
  // The kernel for a padded accumulator (block_kernels.hpp), or null where m has no padded form.
  static BlockRowKernel padded_kernel(std::int32_t m) {
    if (m >= 9 && m <= planes::kMaxBlock) return RowStrips<Planes512>::block_row;
    return m >= 2 && m <= 7 && m != 4 ? kernel(m) : nullptr;
  }
  static RowKernel row_kernel(std::int32_t m) {
    switch (m) {
      case 2: return tile_lane_row<Planes512, 2>;
      case 3: return tile_lane_row<Planes512, 3>;
      case 5: return tile_lane_row<Planes512, 5>;
      case 6: return tile_lane_row<Planes512, 6>;
      case 7: return tile_lane_row<Planes512, 7>;
      default: return nullptr;
    }
  }
};

}  // namespace
}  // namespace blockmm::kernels::cpu
