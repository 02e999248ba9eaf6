// blockmm-cmp's semantics: two COL380 files are equal when they have the same n and m and the
// same map (i, j) -> block values, all-zero blocks counting as absent and record order free.
// --strict also asks ACTUAL to be what blockmm writes: sorted by (i, j), no all-zero block.
#pragma once

#include <cstdint>
#include <string>

#include "tools/mapped_file.hpp"

namespace blockmm::tools {

struct Comparison {
  bool equal() const { return shape_differs.empty() && first_difference.empty() && strict_problem.empty(); }

  std::string shape_differs;     // n or m differ: nothing else is compared
  std::string first_difference;  // the first in (i, j) order, "" when the maps agree
  std::string strict_problem;    // the first --strict violation, "" when none (or not strict)

  std::int64_t expected_blocks = 0;   // non-zero blocks of EXPECTED
  std::int64_t actual_blocks = 0;     // non-zero blocks of ACTUAL (first copies)
  std::int64_t differing_blocks = 0;  // present in both, values differ
  std::int64_t differing_values = 0;  // values that differ in those blocks
  std::int64_t missing_blocks = 0;    // in EXPECTED, absent (or all zero) in ACTUAL
  std::int64_t extra_blocks = 0;      // in ACTUAL, absent (or all zero) in EXPECTED
  std::int64_t actual_duplicates = 0;
  std::int64_t actual_zero_blocks = 0;
};

// EXPECTED and ACTUAL hold values of the same width. Throws InputError (naming EXPECTED) when
// EXPECTED holds a block twice: it does not define a map. A duplicate in ACTUAL is a difference.
Comparison compare_files(const MappedFile& expected, const MappedFile& actual, bool strict);

// A one-line account of the counts, e.g. "2 blocks differ (3 values), 1 missing, 0 extra".
std::string summarize(const Comparison& c);

}  // namespace blockmm::tools
