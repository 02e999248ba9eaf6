// The byte-plane block kernel for m = 9..64 (kMaxBlock) on AVX-512 BW, with or without VNNI, into
// a padded accumulator: tile rows at a stride of whole registers (padded_row_stride), so that
// every load and store of a tile row is a whole aligned register, none masked (masked stores
// into the records held up the loads after them: bench/NOTES.md item 43). Included by
// avx512_planes.hpp only.
//
// Per A block, prepared once for every B block of its row: the rows that hold a non-zero (the
// others add nothing to the tile) and its non-zero columns, paired up as the instruction's pairs
// (a zero column contributes nothing to any sum, so the contraction runs over the others only).
// Blocks of chemistry's overlap matrices are mostly such zeros (water, m = 23: 69 % of the values,
// a third of the rows and columns; issue 48). Per B block: the B rows of those pairs (each row
// loaded once for both strips where m <= 32), offset into int16 and interleaved 16 columns a strip
// (lane c = (b(k, c), b(k', c))), then eight A rows at a time multiply-add each pair (the pair
// loaded once for the eight, A's pair word broadcast from memory), and one saturating add into
// each row's strip. Lanes past m in the last strip are the padding: what lands there is never
// read back. The sums and bounds are byte_planes.hpp's, over a subset of each row's terms: the
// dropped terms are zero, and the offset correction 2^15 sum_l a(r, l) is the same. One plane
// is taken by a bound on each row's sum rather than on each value (prepare()).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/block_row_task.hpp"
#include "kernels/cpu/byte_planes.hpp"

namespace blockmm::kernels::cpu {
namespace {

// Lanes a padded tile row takes: whole registers of 16.
constexpr std::int64_t strip_row_stride(std::int32_t m) { return 16 * ((std::int64_t{m} + 15) / 16); }

// An A block's non-zero rows and column pairs, in pair words (byte_planes.hpp's layout over
// those columns only).
struct CompactA {
  static constexpr int kMax = planes::kMaxBlock;
  int rows = 0;   // non-zero rows
  int pairs = 0;  // pairs of non-zero columns (the last one's second column repeats its first, weight 0)
  bool one_plane = true;
  std::int32_t row[kMax];        // the non-zero rows
  std::int32_t row_lane[kMax];   // their first lanes in the padded tile
  std::int32_t column[kMax];     // the columns of each pair's two halves
  std::int32_t b_word[kMax];     // their B rows' offsets in values (column * m)
  alignas(64) std::uint32_t lo[kMax * kMax / 2];  // [row i * pairs + pair q]
  alignas(64) std::uint32_t hi[kMax * kMax / 2];
  std::uint32_t correction_lo[kMax], correction_hi[kMax];

  void prepare(const std::uint16_t* a, int m) {
    const std::int64_t row_stride = strip_row_stride(m);
    std::uint64_t nonzero_columns = 0;
    std::uint32_t largest = 0;
    rows = 0;
    std::uint32_t max_row_sum = 0;
    for (int r = 0; r < m; ++r) {
      std::uint64_t columns = 0;
      std::uint32_t row_sum = 0;
      for (int c = 0; c < m; ++c) {
        const std::uint32_t v = a[r * m + c];
        columns |= std::uint64_t{v != 0} << c;
        largest = v > largest ? v : largest;
        row_sum += v;
      }
      max_row_sum = row_sum > max_row_sum ? row_sum : max_row_sum;
      nonzero_columns |= columns;
      if (columns == 0) continue;
      row[rows] = r;
      row_lane[rows++] = static_cast<std::int32_t>(r * row_stride);
    }
    int count = 0;
    for (std::uint64_t bits = nonzero_columns; bits != 0; bits &= bits - 1) column[count++] = __builtin_ctzll(bits);
    pairs = (count + 1) / 2;
    if (count % 2 == 1) column[count] = column[count - 1];  // weight 0
    for (int h = 0; h < 2 * pairs; ++h) b_word[h] = column[h] * m;
    // One plane where every row's sum is at most 65537 (byte_planes.hpp: L(r, c) <= 65535 times
    // it <= 2^32 - 1) and every value fits int16: most blocks of a 16-bit overlap matrix, whose
    // rows hold a few large values among small ones (the per-value limit 65537 / m took half).
    one_plane = largest <= 32767 && max_row_sum <= 65537;
    for (int i = 0; i < rows; ++i) {
      const std::uint16_t* values = a + row[i] * m;
      std::uint32_t sum_lo = 0, sum_hi = 0;
      for (int q = 0; q < pairs; ++q) {
        const std::uint32_t first = values[column[2 * q]];
        const std::uint32_t second = 2 * q + 1 < count ? values[column[2 * q + 1]] : 0;
        if (one_plane) {
          lo[i * pairs + q] = first | second << 16;
          sum_lo += first + second;
        } else {
          lo[i * pairs + q] = (first & 0xFFu) | (second & 0xFFu) << 16;
          hi[i * pairs + q] = first >> 8 | (second >> 8) << 16;
          sum_lo += (first & 0xFFu) + (second & 0xFFu);
          sum_hi += (first >> 8) + (second >> 8);
        }
      }
      correction_lo[i] = sum_lo * 32768u;  // modulo 2^32, as the lanes add
      correction_hi[i] = sum_hi * 32768u;
    }
  }
};

template <class P>
struct RowStrips {
  // The n <= 16 values of a B row's strip at v: a plain load where its 32 bytes lie in v's page
  // (what it reads past the row reaches padding lanes only), masked at a page's end.
  static __m256i load16(const std::uint16_t* v, __mmask16 n_mask) {
    if (load_stays_in_page(v, 32))
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v));
    return _mm256_maskz_loadu_epi16(n_mask, v);
  }

  // Pair q's B rows at columns [col0, col0 + 16), interleaved and offset.
  static __m512i b_pair(const std::uint16_t* b, const CompactA& a, int q, int col0, __mmask16 n_mask) {
    const __m512i interleave = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                                39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i first = _mm512_zextsi256_si512(load16(b + a.b_word[2 * q] + col0, n_mask));
    const __m512i second = _mm512_zextsi256_si512(load16(b + a.b_word[2 * q + 1] + col0, n_mask));
    return _mm512_xor_si512(_mm512_permutex2var_epi16(first, interleave, second), P::offset());
  }

  // acc + the pair sums of `pair` with A's pair word at `word` in every lane. With VNNI one
  // instruction, the word broadcast from memory inside it: the compiler (GCC 12) broadcast it
  // into a register first and copied every accumulator twice around the destructive multiply-add,
  // four instructions a multiply-add.
  static __m512i madd_broadcast(__m512i acc, __m512i pair, const std::uint32_t* word) {
    if constexpr (P::kVnni) {
      asm("vpdpwssd %[word]%{1to16%}, %[pair], %[acc]" : [acc] "+v"(acc) : [pair] "v"(pair), [word] "m"(*word));
      return acc;
    } else {
      return P::madd_add(acc, pair, _mm512_set1_epi32(static_cast<int>(*word)));
    }
  }

  static void flush(std::uint32_t* c, __m512i sum) {
    const __m512i cur = _mm512_load_si512(c);
    _mm512_store_si512(c, _mm512_add_epi32(cur, _mm512_min_epu32(sum, _mm512_xor_si512(cur, _mm512_set1_epi32(-1)))));
  }

  // Rows [i, i + G) of the non-zero rows, one strip: G chains a plane, each pair loaded once for
  // the G rows.
  template <int G, bool OnePlane>
  __attribute__((always_inline)) static void row_group(std::uint32_t* c, const CompactA& a, const __m512i* b_pairs,
                                                       int i) {
    __m512i lo[G], hi[G];
    for (int g = 0; g < G; ++g) {
      lo[g] = _mm512_set1_epi32(static_cast<int>(a.correction_lo[i + g]));
      if constexpr (!OnePlane) hi[g] = _mm512_set1_epi32(static_cast<int>(a.correction_hi[i + g]));
    }
    const std::uint32_t* lo_words = a.lo + i * a.pairs;
    const std::uint32_t* hi_words = a.hi + i * a.pairs;
    for (int q = 0; q < a.pairs; ++q) {
      const __m512i pair = _mm512_load_si512(b_pairs + q);
      for (int g = 0; g < G; ++g) {
        lo[g] = madd_broadcast(lo[g], pair, lo_words + g * a.pairs + q);
        if constexpr (!OnePlane) hi[g] = madd_broadcast(hi[g], pair, hi_words + g * a.pairs + q);
      }
    }
    for (int g = 0; g < G; ++g) flush(c + a.row_lane[i + g], OnePlane ? lo[g] : P::combine(hi[g], lo[g]));
  }

  // Every non-zero row of the A block, one strip.
  template <bool OnePlane>
  __attribute__((always_inline)) static void rows(std::uint32_t* c, const CompactA& a, const __m512i* b_pairs) {
    int i = 0;
    for (; i + 8 <= a.rows; i += 8) row_group<8, OnePlane>(c, a, b_pairs, i);
    if (a.rows - i >= 4) {
      row_group<4, OnePlane>(c, a, b_pairs, i);
      i += 4;
    }
    if (a.rows - i >= 2) {
      row_group<2, OnePlane>(c, a, b_pairs, i);
      i += 2;
    }
    if (a.rows - i >= 1) row_group<1, OnePlane>(c, a, b_pairs, i);
  }

  // The 32 values of a B row at v (m <= 32: both strips), offset; a plain load where its 64
  // bytes lie in v's page (what it reads past the row reaches padding lanes only).
  static __m512i load32(const std::uint16_t* v, __mmask32 m_mask) {
    const __m512i row = load_stays_in_page(v, 64) ? _mm512_loadu_si512(v) : _mm512_maskz_loadu_epi16(m_mask, v);
    return _mm512_xor_si512(row, P::offset());
  }

  // The B block of the product kAhead ahead (the tile is in the piece's padded accumulator, in
  // L2; prefetching it as well measured no faster).
  static constexpr std::int64_t kAhead = 4;
  static void prefetch(const BlockRowTask& task, std::int64_t f, const std::uint16_t* b, std::int64_t mm) {
    if (f + kAhead < task.count) P::prefetch_range(b + kAhead * mm, mm * 2);
  }

  template <bool OnePlane>
  __attribute__((noinline)) static void products(const BlockRowTask& task, const CompactA& a) {
    const int m = task.m;
    const std::int64_t mm = std::int64_t{m} * m;
    __m512i b_pairs[2][planes::pairs(planes::kMaxBlock)];
    // Lane c of strip s: (first row's value 16 s + c, second row's), from the two rows' 32 values.
    const __m512i strip0 = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                            39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i strip1 = _mm512_add_epi16(strip0, _mm512_set1_epi16(16));
    const __mmask32 m_mask = m >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << m) - 1);
    const std::uint16_t* b = task.b_values;
    for (std::int64_t f = 0; f < task.count; ++f, b += mm) {
      const std::int32_t slot = task.slot[task.b_col[f]];
      prefetch(task, f, b, mm);
      if (slot < 0) continue;  // no output tile here (the masks of this pair are disjoint)
      std::uint32_t* tile = task.acc + slot * task.acc_stride;
      if (m <= 32) {  // each B row loaded once for both strips
        for (int q = 0; q < a.pairs; ++q) {
          const __m512i first = load32(b + a.b_word[2 * q], m_mask), second = load32(b + a.b_word[2 * q + 1], m_mask);
          b_pairs[0][q] = _mm512_permutex2var_epi16(first, strip0, second);
          if (m > 16) b_pairs[1][q] = _mm512_permutex2var_epi16(first, strip1, second);
        }
        rows<OnePlane>(tile, a, b_pairs[0]);
        if (m > 16) rows<OnePlane>(tile + 16, a, b_pairs[1]);
        continue;
      }
      for (int col0 = 0; col0 < m; col0 += 16) {
        const __mmask16 n_mask = m - col0 >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (m - col0)) - 1);
        for (int q = 0; q < a.pairs; ++q) b_pairs[0][q] = b_pair(b, a, q, col0, n_mask);
        rows<OnePlane>(tile + col0, a, b_pairs[0]);
      }
    }
  }

  // The block-row kernel at the padded stride (task.acc 64-byte aligned, tiles m rows of
  // strip_row_stride(m) lanes).
  static void block_row(const BlockRowTask& task) {
    CompactA a;
    a.prepare(task.a, task.m);
    if (a.rows == 0) return;
    if (a.one_plane)
      products<true>(task, a);
    else
      products<false>(task, a);
  }
};

}  // namespace
}  // namespace blockmm::kernels::cpu
