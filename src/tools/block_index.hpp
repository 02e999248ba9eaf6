// The records of a COL380 file in (i, j) order, without moving them: grouped by block-row, then
// each row's entries sorted by column. Only the block-rows that hold records are listed, so that
// memory follows the records, never n: a 12-byte file may claim n = 2^31 - 1. Costs 8 bytes a
// record (nothing when the file is already sorted) and 12 a non-empty row, never a per-block
// container, so 67 M-block outputs index in memory.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/mapped_file.hpp"

namespace blockmm::tools {

class BlockIndex {
 public:
  explicit BlockIndex(const MappedFile& file);

  // The block-rows that hold records, ascending: row(x) for x in [0, rows()).
  std::int64_t rows() const { return static_cast<std::int64_t>(rows_.size()); }
  std::int32_t row(std::int64_t x) const { return rows_[static_cast<std::size_t>(x)]; }
  // Entries [row_begin(x), row_end(x)) are row(x)'s records, columns ascending (ties in file order).
  std::int64_t row_begin(std::int64_t x) const { return row_ptr_[static_cast<std::size_t>(x)]; }
  std::int64_t row_end(std::int64_t x) const { return row_ptr_[static_cast<std::size_t>(x) + 1]; }
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
  void group_unsorted_records(const MappedFile& file);

  std::vector<std::int32_t> rows_;      // non-empty block-rows, ascending
  std::vector<std::int64_t> row_ptr_;   // rows_.size() + 1
  std::vector<std::uint64_t> entries_;  // column << 32 | record; empty means the identity
  std::int64_t first_unsorted_ = -1;
  std::int64_t duplicates_ = 0;
  std::int64_t duplicate_first_ = -1;
  std::int64_t duplicate_second_ = -1;
};

}  // namespace blockmm::tools
