// The byte-plane block kernel for small blocks (m = 2, 3, 5, 6, 7) on AVX-512 BW, with or without
// VNNI: the whole m x m tile in the lanes of ceil(m^2 / 16) registers (lane q = row q / m, column
// q % m), so that a block product costs a few instructions a register, not a loop a tile row
// (issue 48: m = 3 paid ~52 ns a 27-multiply-add product in the strip form). Included by
// avx512_planes.hpp only.
//
// Per A block, from its loaded values and no scalar loop: pair p of lane q is
// (a(r, 2p), a(r, 2p + 1)) (0 past m), one plane where the block is narrow (byte_planes.hpp),
// else the low and high bytes; the offset corrections 2^15 sum_l a(r, l) come from the same
// pairs. Per B block: its m^2 values loaded (two masked loads for m > 5), offset into int16,
// each register's pair p permuted out of them (lane q = (b(2p, c), b(2p + 1, c))), one
// multiply-add a pair and plane, and one saturating add into the tile a register. The bounds are
// byte_planes.hpp's: the same sums, taken lane by lane.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/block_row_task.hpp"
#include "kernels/cpu/byte_planes.hpp"

namespace blockmm::kernels::cpu {
namespace {

template <int M>
struct TileLanes {
  static constexpr int kLanes = M * M;
  static constexpr int kRegs = (kLanes + 15) / 16;
  static constexpr int kPairs = (M + 1) / 2;
  static constexpr int kZeroWord = 63;  // a word of the second source past every block (m <= 7)

  static_assert(M >= 2 && M <= 7, "TileLanes takes 2 <= m <= 7");

  // Word indices into the block's values (b0: words 0-31, b1: 32-63) for register g, pair p:
  // word 2q takes value (2p, c), word 2q + 1 value (2p + 1, c), of lane q's column c (A's
  // pair word: row r's values 2p and 2p + 1). Lanes past m^2, and rows past m, take kZeroWord.
  struct Indices {
    alignas(64) std::uint16_t b[kRegs][kPairs][32];
    alignas(64) std::uint16_t a[kRegs][kPairs][32];
  };
  static const Indices& indices() {
    static const Indices table = [] {
      Indices t{};
      for (int g = 0; g < kRegs; ++g)
        for (int p = 0; p < kPairs; ++p)
          for (int w = 0; w < 16; ++w) {
            const int q = 16 * g + w, r = q / M, c = q % M;
            for (int h = 0; h < 2; ++h) {
              const int l = 2 * p + h;
              const bool in = q < kLanes && l < M;
              t.b[g][p][2 * w + h] = static_cast<std::uint16_t>(in ? l * M + c : kZeroWord);
              t.a[g][p][2 * w + h] = static_cast<std::uint16_t>(in ? r * M + l : kZeroWord);
            }
          }
      return t;
    }();
    return table;
  }

  static __mmask32 words_mask(int first, int count) {  // words [first, first + count) of a 32-word load
    const int n = count - first;
    return n <= 0 ? 0 : n >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << n) - 1);
  }
  static __mmask16 lanes_mask(int g) {
    const int n = kLanes - 16 * g;
    return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
  }
  // The block's values, zero past them. A masked load is slow behind stores (the accumulators'):
  // where the 64 bytes from v lie in v's page, an ordinary load with the words past the block
  // cleared instead.
  static void load_block(const std::uint16_t* v, __m512i& b0, __m512i& b1) {
    if (load_stays_in_page(v, 64) && kLanes <= 32)
      b0 = _mm512_maskz_mov_epi16(words_mask(0, kLanes), _mm512_loadu_si512(v));
    else
      b0 = _mm512_maskz_loadu_epi16(words_mask(0, kLanes), v);
    b1 = kLanes > 32 ? _mm512_maskz_loadu_epi16(words_mask(32, kLanes), v + 32) : _mm512_setzero_si512();
  }
};

// c = min(c + sum, 2^32 - 1) in the lanes of k; a padded accumulator (block_kernels.hpp) as a
// whole aligned register.
template <class P, bool Padded>
__attribute__((always_inline)) inline void flush(std::uint32_t* c, __m512i sum, __mmask16 k) {
  if constexpr (Padded) {
    const __m512i cur = _mm512_load_si512(c);
    _mm512_store_si512(c, _mm512_add_epi32(cur, _mm512_min_epu32(sum, _mm512_xor_si512(cur, _mm512_set1_epi32(-1)))));
  } else {
    P::flush(c, sum, k);
  }
}

// The A block's pairs and offset corrections, from its values a0 (words 0-31), a1 (32-63).
template <int M, bool OnePlane>
struct PreparedTile {
  using L = TileLanes<M>;
  __m512i lo_pairs[L::kRegs][L::kPairs], hi_pairs[L::kRegs][OnePlane ? 1 : L::kPairs];
  __m512i correction_lo[L::kRegs], correction_hi[L::kRegs];

  __attribute__((always_inline)) PreparedTile(const typename L::Indices& ix, __m512i a0, __m512i a1) {
    const __m512i low_byte = _mm512_set1_epi16(0xFF);
    const __m512i ones = _mm512_set1_epi16(1);
    // Past the block, word 63 of the second source is 0 (the loads clear it): pairs past m are 0.
    const __m512i lo0 = OnePlane ? a0 : _mm512_and_si512(a0, low_byte), lo1 = OnePlane ? a1 : _mm512_and_si512(a1, low_byte);
    const __m512i hi0 = _mm512_maskz_srli_epi16(~__mmask32{0}, a0, 8), hi1 = _mm512_maskz_srli_epi16(~__mmask32{0}, a1, 8);
    for (int g = 0; g < L::kRegs; ++g) {
      __m512i sum_lo = _mm512_setzero_si512(), sum_hi = _mm512_setzero_si512();
      for (int p = 0; p < L::kPairs; ++p) {
        const __m512i idx = _mm512_load_si512(ix.a[g][p]);
        lo_pairs[g][p] = _mm512_permutex2var_epi16(lo0, idx, lo1);
        sum_lo = _mm512_add_epi32(sum_lo, _mm512_madd_epi16(lo_pairs[g][p], ones));
        if constexpr (!OnePlane) {
          hi_pairs[g][p] = _mm512_permutex2var_epi16(hi0, idx, hi1);
          sum_hi = _mm512_add_epi32(sum_hi, _mm512_madd_epi16(hi_pairs[g][p], ones));
        }
      }
      correction_lo[g] = _mm512_maskz_slli_epi32(0xFFFF, sum_lo, 15);  // modulo 2^32, as the lanes add
      correction_hi[g] = _mm512_maskz_slli_epi32(0xFFFF, sum_hi, 15);
    }
  }
};

// The A block (prepared) times B blocks [0, count) of b / b_col, each into its slot's tile.
template <class P, int M, bool OnePlane, bool Padded>
__attribute__((always_inline)) inline void tile_lane_products(const typename TileLanes<M>::Indices& ix,
                                                              const PreparedTile<M, OnePlane>& a, std::uint32_t* acc,
                                                              std::int64_t acc_stride, const std::int32_t* slot,
                                                              const std::uint16_t* b, const std::int32_t* b_col,
                                                              std::int64_t count) {
  using L = TileLanes<M>;
  const __m512i offset = _mm512_set1_epi16(static_cast<short>(0x8000));
  constexpr std::int64_t mm = M * M;
  // The B block of the product this far ahead, and its tile where the tiles are the records: a
  // padded accumulator is a short row's, in L1 or L2, and prefetching its tiles cost 7-10 % of
  // the phase (bench/NOTES.md item 43).
  constexpr std::int64_t ahead = 4;
  for (std::int64_t f = 0; f < count; ++f, b += mm) {
    const std::int32_t s = slot[b_col[f]];
    if (f + ahead < count) {
      _mm_prefetch(reinterpret_cast<const char*>(b + ahead * mm), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + ahead * mm + mm - 1), _MM_HINT_T0);
      const std::int32_t s_ahead = Padded ? -1 : slot[b_col[f + ahead]];
      if (s_ahead >= 0) {
        _mm_prefetch(reinterpret_cast<const char*>(acc + s_ahead * acc_stride), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(acc + s_ahead * acc_stride + mm - 1), _MM_HINT_T0);
      }
    }
    if (s < 0) continue;  // no output tile here (the masks of this pair are disjoint)
    __m512i b0, b1;
    L::load_block(b, b0, b1);
    b0 = _mm512_xor_si512(b0, offset);
    b1 = _mm512_xor_si512(b1, offset);
    std::uint32_t* c = acc + s * acc_stride;
    for (int g = 0; g < L::kRegs; ++g) {
      __m512i lo = a.correction_lo[g], hi = a.correction_hi[g];
      for (int p = 0; p < L::kPairs; ++p) {
        const __m512i pair = _mm512_permutex2var_epi16(b0, _mm512_load_si512(ix.b[g][p]), b1);
        lo = P::madd_add(lo, a.lo_pairs[g][p], pair);
        if constexpr (!OnePlane) hi = P::madd_add(hi, a.hi_pairs[g][p], pair);
      }
      if constexpr (OnePlane)
        flush<P, Padded>(c + 16 * g, lo, L::lanes_mask(g));
      else
        flush<P, Padded>(c + 16 * g, P::combine(hi, lo), L::lanes_mask(g));
    }
  }
}

// One plane where every value of the A block is at most the limit (byte_planes.hpp).
template <int M>
inline bool one_plane(__m512i a0, __m512i a1) {
  const __m512i limit = _mm512_set1_epi16(static_cast<short>(planes::one_plane_limit(M)));
  return (_mm512_cmpgt_epu16_mask(a0, limit) | _mm512_cmpgt_epu16_mask(a1, limit)) == 0;
}

template <class P, int M, bool OnePlane, bool Padded>
__attribute__((noinline)) void tile_lane_block_products(const BlockRowTask& task, __m512i a0, __m512i a1) {
  const typename TileLanes<M>::Indices& ix = TileLanes<M>::indices();
  const PreparedTile<M, OnePlane> a(ix, a0, a1);
  tile_lane_products<P, M, OnePlane, Padded>(ix, a, task.acc, task.acc_stride, task.slot, task.b_values, task.b_col,
                                             task.count);
}

// The block-row kernel's form (BlockRowTask: one A block).
template <class P, int M>
void tile_lane_block_row(const BlockRowTask& task) {
  __m512i a0, a1;
  TileLanes<M>::load_block(task.a, a0, a1);
  const bool padded = task.acc_stride % 16 == 0 && reinterpret_cast<std::uintptr_t>(task.acc) % 64 == 0;
  if (one_plane<M>(a0, a1))
    padded ? tile_lane_block_products<P, M, true, true>(task, a0, a1) : tile_lane_block_products<P, M, true, false>(task, a0, a1);
  else
    padded ? tile_lane_block_products<P, M, false, true>(task, a0, a1) : tile_lane_block_products<P, M, false, false>(task, a0, a1);
}

// The whole-row form (RowTask: every A block of an output row, a padded accumulator), so that
// the per-A-block call, setup and the first misses of each B row are not paid per A block.
template <class P, int M>
void tile_lane_row(const RowTask& task) {
  const typename TileLanes<M>::Indices& ix = TileLanes<M>::indices();
  constexpr std::int64_t mm = M * M;
  constexpr std::int64_t row_ahead = 2;
  const std::uint16_t* a_values = task.a_values;
  for (std::int64_t e = 0; e < task.a_count; ++e, a_values += mm) {
    if (e + row_ahead < task.a_count) {  // the start of the B row two A blocks ahead
      const std::int64_t k_ahead = std::int64_t{task.a_col[e + row_ahead]} - task.b_row_begin;
      if (k_ahead >= 0 && k_ahead < task.b_rows) {
        const std::int64_t f = task.b_row_ptr[k_ahead];
        _mm_prefetch(reinterpret_cast<const char*>(task.b_col + f), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(task.b_values + f * mm), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(task.b_values + f * mm) + 64, _MM_HINT_T0);
      }
    }
    const std::int64_t k = std::int64_t{task.a_col[e]} - task.b_row_begin;
    if (k < 0 || k >= task.b_rows) continue;
    const std::int64_t f0 = task.b_row_ptr[k], count = task.b_row_ptr[k + 1] - f0;
    if (count == 0) continue;
    __m512i a0, a1;
    TileLanes<M>::load_block(a_values, a0, a1);
    if (one_plane<M>(a0, a1)) {
      const PreparedTile<M, true> a(ix, a0, a1);
      tile_lane_products<P, M, true, true>(ix, a, task.acc, task.acc_stride, task.slot, task.b_values + f0 * mm,
                                           task.b_col + f0, count);
    } else {
      const PreparedTile<M, false> a(ix, a0, a1);
      tile_lane_products<P, M, false, true>(ix, a, task.acc, task.acc_stride, task.slot, task.b_values + f0 * mm,
                                            task.b_col + f0, count);
    }
  }
}

}  // namespace
}  // namespace blockmm::kernels::cpu
