// blockmm-gen's engine: a random COL380 input matrix, written atomically. Every random choice
// is keyed by (seed, what, where) (tools/counter_rng.hpp), so the bytes depend on the spec
// alone, never on the thread count; and the same seed gives the same matrix in every order.
#pragma once

#include <cstdint>
#include <string>

namespace blockmm::tools {

enum class RecordOrder { shuffled, sorted, reverse };

struct GenSpec {
  std::int32_t n = 0;
  std::int32_t m = 0;
  std::int64_t k = 0;            // distinct blocks, 0 <= k <= (n/m)^2 and <= 2^31 - 1
  std::uint32_t min_value = 0;   // values uniform in [min_value, max_value]
  // 1023, as the course's generator: a product's sums of up to 4104 terms stay below 2^32 - 1,
  // where 65535 saturates almost every value of any product but the smallest.
  std::uint32_t max_value = 1023;
  std::uint64_t seed = 1;
  RecordOrder order = RecordOrder::shuffled;
  double skew = 0;               // power-law block-row skew (tools/row_counts.hpp)
  double zero_blocks = 0;        // fraction of the k blocks that are all zero (rounded)
};

struct GenResult {
  std::int64_t zero_blocks = 0;
  std::int64_t bytes = 0;
};

// Throws UsageError when the spec is impossible (checked before anything is created).
void check_spec(const GenSpec& spec);

// The number of all-zero blocks the spec asks for: round(zero_blocks * k).
std::int64_t zero_block_count(const GenSpec& spec);

// Writes the matrix to `path` (temporary file + rename). Throws OutputError on I/O failure.
GenResult generate(const GenSpec& spec, const std::string& path);

}  // namespace blockmm::tools
