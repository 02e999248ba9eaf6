#include "tools/block_index.hpp"

#include <algorithm>
#include <limits>

namespace blockmm::tools {
namespace {

std::uint64_t key(const MappedFile& file, std::int64_t r) {
  return static_cast<std::uint64_t>(file.row(r)) << 32 | static_cast<std::uint32_t>(file.col(r));
}

// A counting array over every block-row costs 8 bytes a row: used while that stays within a
// small multiple of the records (as partition/relabel.hpp decides for blockmm itself).
constexpr std::int64_t kDenseRowsAlways = std::int64_t{1} << 16;
constexpr std::int64_t kDenseRowsPerRecord = 4;

}  // namespace

BlockIndex::BlockIndex(const MappedFile& file) {
  const std::int64_t k = file.records();

  std::int64_t first_unsorted = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(min : first_unsorted) schedule(static)
  for (std::int64_t r = 1; r < k; ++r)
    if (key(file, r) < key(file, r - 1)) first_unsorted = std::min(first_unsorted, r);
  if (first_unsorted != std::numeric_limits<std::int64_t>::max()) first_unsorted_ = first_unsorted;

  if (sorted()) {
    // The rows come in order: one pass lists them and where each begins.
    for (std::int64_t r = 0; r < k; ++r) {
      if (rows_.empty() || file.row(r) != rows_.back()) {
        rows_.push_back(file.row(r));
        row_ptr_.push_back(r);
      }
    }
    row_ptr_.push_back(k);
  } else {
    group_unsorted_records(file);
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

// A counting sort by block-row (over every row where that costs little, else over the distinct
// rows found by sorting them), then each row's entries sorted by column.
void BlockIndex::group_unsorted_records(const MappedFile& file) {
  const std::int64_t k = file.records();
  const std::int64_t p = file.block_rows();
  // Each record's slot among the counted rows: its row itself, or its rank among the distinct rows.
  std::vector<std::int64_t> counts;
  std::vector<std::int32_t> distinct;
  const bool dense = p <= std::max(kDenseRowsAlways, kDenseRowsPerRecord * k);
  if (dense) {
    counts.assign(static_cast<std::size_t>(p) + 1, 0);
  } else {
    distinct.resize(static_cast<std::size_t>(k));
    for (std::int64_t r = 0; r < k; ++r) distinct[static_cast<std::size_t>(r)] = file.row(r);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    counts.assign(distinct.size() + 1, 0);
  }
  const auto slot = [&](std::int64_t r) -> std::size_t {
    const std::int32_t i = file.row(r);
    if (dense) return static_cast<std::size_t>(i);
    return static_cast<std::size_t>(std::lower_bound(distinct.begin(), distinct.end(), i) - distinct.begin());
  };
  for (std::int64_t r = 0; r < k; ++r) ++counts[slot(r) + 1];
  for (std::size_t x = 1; x < counts.size(); ++x) counts[x] += counts[x - 1];

  // Record numbers fit 32 bits: k <= 2^31 - 1 (the header field is an int32).
  entries_.resize(static_cast<std::size_t>(k));
  {
    std::vector<std::int64_t> next(counts.begin(), counts.end() - 1);
    for (std::int64_t r = 0; r < k; ++r)
      entries_[static_cast<std::size_t>(next[slot(r)]++)] =
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(file.col(r))) << 32 | static_cast<std::uint64_t>(r);
  }

  // Keep the rows that hold records.
  for (std::size_t x = 0; x + 1 < counts.size(); ++x) {
    if (counts[x + 1] == counts[x]) continue;
    rows_.push_back(dense ? static_cast<std::int32_t>(x) : distinct[x]);
    row_ptr_.push_back(counts[x]);
  }
  row_ptr_.push_back(k);

  const auto rows = static_cast<std::int64_t>(rows_.size());
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int64_t x = 0; x < rows; ++x) std::sort(entries_.begin() + row_begin(x), entries_.begin() + row_end(x));
}

}  // namespace blockmm::tools
