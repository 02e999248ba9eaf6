// How many of a generated matrix's k blocks fall in each block-row: the power-law skew that
// work-balancing tests and benchmarks use (row 0 heaviest), or an even spread.
#pragma once

#include <cstdint>
#include <vector>

namespace blockmm::tools {

// Row i's share of k is proportional to (i + 1)^-alpha; a row never holds more than p blocks,
// and a capped row's overflow goes to the other rows in proportion to their weights (water
// filling). Shares are rounded cumulatively, so every count is within 1 of its exact share and
// the counts sum to k exactly. alpha = 0 spreads k evenly (each row k/p, rounded).
// Requires p >= 1, 0 <= k <= p^2, alpha >= 0 and finite.
std::vector<std::int64_t> block_row_counts(std::int64_t k, std::int64_t p, double alpha);

}  // namespace blockmm::tools
