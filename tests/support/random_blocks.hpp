// Random block matrices for tests, generated in-process (independent of blockmm-gen).
#pragma once

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "core/block_matrix.hpp"

namespace blockmm::testing {

struct RandomSpec {
  std::int32_t n = 64;
  std::int32_t m = 4;
  double density = 0.3;           // fraction of the p^2 blocks present
  std::uint32_t max_value = 65535;
  double zero_value_fraction = 0;  // fraction of values forced to 0 inside present blocks
  double zero_block_fraction = 0;  // fraction of present blocks that are all zero
  double empty_row_fraction = 0;   // fraction of block-rows left empty
  double empty_col_fraction = 0;   // fraction of block-columns left empty
  bool shuffle = true;             // record order
};

InputRecords random_blocks(const RandomSpec& spec, std::mt19937_64& rng);

// Fixed cases: records of the given (block-row, block-column, m*m values) in that order.
InputRecords make_records(std::int32_t n, std::int32_t m,
                          const std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>& blocks);

// The same records in a random order (what the general build sorts; in order they take the
// one-pass build).
InputRecords shuffled_records(const InputRecords& records, std::mt19937_64& rng);

// The records whose block-row is in [lo, hi), in their order: a rank's share.
InputRecords records_in_rows(const InputRecords& records, std::int32_t lo, std::int32_t hi);

// A random spec covering the awkward cases: m in 1..32 (odd too), n not a power of two,
// empty rows and columns, zero blocks, values near 65535 so that saturation fires.
RandomSpec random_spec(std::mt19937_64& rng, std::int32_t max_block_rows = 24);

}  // namespace blockmm::testing
