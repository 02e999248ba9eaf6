// Brute-force dense product for small matrices: the oracle's oracle. Expands the blocks into
// n x n uint64 arrays, multiplies element by element, saturates, then cuts C back into blocks.
#pragma once

#include <string>

#include "core/block_matrix.hpp"

namespace blockmm::testing {

// Sorted non-zero blocks of A x B in output record layout. Duplicate input blocks are summed
// (callers pass valid inputs).
OutputRecords dense_product(const InputRecords& a, const InputRecords& b);

// Semantic equality of two outputs: same shape and the same set of (i, j) -> values.
// Returns "" when equal, else a description of the first difference.
std::string compare_outputs(const OutputRecords& expected, const OutputRecords& actual);

}  // namespace blockmm::testing
