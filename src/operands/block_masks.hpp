// A block's operand mask (the columns of a left operand's block, the rows of a right one's, that
// hold a non-zero value) and its all-zero test, shared by the builds of operands/.
#pragma once

#include <cstdint>

#include "core/block_matrix.hpp"
#include "core/record_source.hpp"

namespace blockmm::operands {

inline void set_bit(std::uint64_t* mask, std::int32_t bit) { mask[bit >> 6] |= std::uint64_t{1} << (bit & 63); }

// ORs the block's mask into `mask` (mask_words(m) words, cleared by the caller).
inline void compute_mask(const std::uint16_t* v, std::int32_t m, OperandRole role, std::uint64_t* mask) {
  if (m <= 64) {  // one word, built in a register: an OR into memory an element chained the stores
    // The rows ORed together value by value (columns), or each row ORed down (rows): loops the
    // compiler vectorises, a bit test a column or row after (m = 23: a bit test a value cost
    // 1.3 ns a value, most of a water block's build).
    std::uint16_t lines[64] = {};
    for (std::int32_t r = 0; r < m; ++r) {
      const std::uint16_t* row = v + std::int64_t{r} * m;
      if (role == OperandRole::left) {
        for (std::int32_t c = 0; c < m; ++c) lines[c] |= row[c];
      } else {
        std::uint16_t any = 0;
        for (std::int32_t c = 0; c < m; ++c) any |= row[c];
        lines[r] = any;
      }
    }
    std::uint64_t bits = 0;
    for (std::int32_t x = 0; x < m; ++x) bits |= std::uint64_t{lines[x] != 0} << x;
    mask[0] = bits;
    return;
  }
  for (std::int32_t r = 0; r < m; ++r)
    for (std::int32_t c = 0; c < m; ++c)
      if (v[std::int64_t{r} * m + c] != 0) set_bit(mask, role == OperandRole::left ? c : r);
}

inline bool all_zero(const std::uint16_t* v, std::int64_t count) {
  std::uint16_t any = 0;  // no early exit: a reduction the compiler vectorises (blocks are rarely all zero)
  for (std::int64_t e = 0; e < count; ++e) any |= v[e];
  return any == 0;
}

}  // namespace blockmm::operands
