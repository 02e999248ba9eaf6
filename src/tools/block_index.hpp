// The records of a COL380 file in (i, j) order, without moving them: a counting sort by
// block-row, then each row's entries sorted by column. Costs 8 bytes a record (nothing when the
// file is already sorted), never a per-block container, so 67 M-block outputs index in memory.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/mapped_file.hpp"

namespace blockmm::tools {

class BlockIndex {
 public:
  explicit BlockIndex(const MappedFile& file);

  // Entries [row_begin(i), row_end(i)) are row i's records, columns ascending (ties in file order).
  std::int64_t row_begin(std::int32_t i) const { return row_ptr_[static_cast<std::size_t>(i)]; }
  std::int64_t row_end(std::int32_t i) const { return row_ptr_[static_cast<std::size_t>(i) + 1]; }
  std::int64_t record_at(std::int64_t s) const {
    return entries_.empty() ? s : static_cast<std::int64_t>(entries_[static_cast<std::size_t>(s)] & 0xFFFFFFFFu);
  }

  // Records in non-decreasing (i, j) order as stored; if not, the first record that breaks it.
  bool sorted() const { return first_unsorted_ < 0; }
  std::int64_t first_unsorted() const { return first_unsorted_; }
  // Records beyond the first of their (i, j); the first such pair (lowest (i, j)): record numbers.
  std::int64_t duplicates() const { return duplicates_; }
  std::int64_t duplicate_first() const { return duplicate_first_; }
  std::int64_t duplicate_second() const { return duplicate_second_; }

 private:
  std::vector<std::int64_t> row_ptr_;
  std::vector<std::uint64_t> entries_;  // column << 32 | record; empty means the identity
  std::int64_t first_unsorted_ = -1;
  std::int64_t duplicates_ = 0;
  std::int64_t duplicate_first_ = -1;
  std::int64_t duplicate_second_ = -1;
};

}  // namespace blockmm::tools
