#include "tools/block_index.hpp"

#include <algorithm>
#include <limits>

namespace blockmm::tools {
namespace {

std::uint64_t key(const MappedFile& file, std::int64_t r) {
  return static_cast<std::uint64_t>(file.row(r)) << 32 | static_cast<std::uint32_t>(file.col(r));
}

}  // namespace

BlockIndex::BlockIndex(const MappedFile& file) {
  const std::int64_t k = file.records();
  const std::int32_t p = file.block_rows();

  std::int64_t first_unsorted = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(min : first_unsorted) schedule(static)
  for (std::int64_t r = 1; r < k; ++r)
    if (key(file, r) < key(file, r - 1)) first_unsorted = std::min(first_unsorted, r);
  if (first_unsorted != std::numeric_limits<std::int64_t>::max()) first_unsorted_ = first_unsorted;

  row_ptr_.assign(static_cast<std::size_t>(p) + 1, 0);
  for (std::int64_t r = 0; r < k; ++r) ++row_ptr_[static_cast<std::size_t>(file.row(r)) + 1];
  for (std::size_t i = 1; i < row_ptr_.size(); ++i) row_ptr_[i] += row_ptr_[i - 1];

  if (!sorted()) {
    // Record numbers fit 32 bits: k <= 2^31 - 1 (the header field is an int32).
    entries_.resize(static_cast<std::size_t>(k));
    std::vector<std::int64_t> next(row_ptr_.begin(), row_ptr_.end() - 1);
    for (std::int64_t r = 0; r < k; ++r)
      entries_[static_cast<std::size_t>(next[static_cast<std::size_t>(file.row(r))]++)] =
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(file.col(r))) << 32 | static_cast<std::uint64_t>(r);
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int32_t i = 0; i < p; ++i) std::sort(entries_.begin() + row_begin(i), entries_.begin() + row_end(i));
  }

  // Duplicates sit next to each other now; the first pair by (i, j) is the one reported.
  std::int64_t duplicates = 0;
  std::int64_t first_pair = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(+ : duplicates) reduction(min : first_pair) schedule(static)
  for (std::int64_t s = 1; s < k; ++s) {
    const std::int64_t a = record_at(s - 1), b = record_at(s);
    if (key(file, a) == key(file, b)) {
      ++duplicates;
      first_pair = std::min(first_pair, s);
    }
  }
  duplicates_ = duplicates;
  if (duplicates > 0) {
    duplicate_first_ = record_at(first_pair - 1);
    duplicate_second_ = record_at(first_pair);
  }
}

}  // namespace blockmm::tools
