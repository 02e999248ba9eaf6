#include "partition/compress.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.hpp"

namespace blockmm::partition {
namespace {

void set_bit(std::uint64_t* mask, std::int32_t bit) { mask[bit >> 6] |= std::uint64_t{1} << (bit & 63); }

void compute_mask(const std::uint16_t* v, std::int32_t m, OperandRole role, std::uint64_t* mask) {
  for (std::int32_t r = 0; r < m; ++r)
    for (std::int32_t c = 0; c < m; ++c)
      if (v[r * m + c] != 0) set_bit(mask, role == OperandRole::left ? c : r);
}

bool all_zero(const std::uint16_t* v, std::int64_t count) {
  for (std::int64_t e = 0; e < count; ++e)
    if (v[e] != 0) return false;
  return true;
}

void build_csc(BlockMatrix& matrix) {
  const std::int32_t p = matrix.shape.block_rows();
  matrix.col_ptr.assign(static_cast<std::size_t>(p) + 1, 0);
  for (std::int32_t j : matrix.col) ++matrix.col_ptr[j + 1];
  std::partial_sum(matrix.col_ptr.begin(), matrix.col_ptr.end(), matrix.col_ptr.begin());
  matrix.csc_row.resize(matrix.col.size());
  matrix.csc_block.resize(matrix.col.size());
  std::vector<std::int64_t> next(matrix.col_ptr.begin(), matrix.col_ptr.end() - 1);
  // Rows ascend in CSR order, so each column's rows come out ascending.
  for (std::int32_t r = 0; r < matrix.rows_held(); ++r) {
    for (std::int64_t b = matrix.row_ptr[r]; b < matrix.row_ptr[r + 1]; ++b) {
      const std::int64_t slot = next[matrix.col[b]]++;
      matrix.csc_row[slot] = matrix.row_begin + r;
      matrix.csc_block[slot] = b;
    }
  }
}

}  // namespace

BlockMatrix build_block_matrix(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message) {
  const std::int32_t m = records.shape.m;
  const std::int64_t mm = records.shape.block_values();
  const std::int32_t rows = row_end - row_begin;
  const std::int64_t count = records.size();

  // Counting sort by row, then columns sorted within each row.
  std::vector<std::int64_t> start(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t q = 0; q < count; ++q) {
    const std::int32_t i = record_row(records.record(q));
    if (i < row_begin || i >= row_end)
      throw Error(ExitCode::other, "internal error: block-row " + std::to_string(i) + " sent to the wrong rank");
    ++start[i - row_begin + 1];
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  {
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (std::int64_t q = 0; q < count; ++q) order[next[record_row(records.record(q)) - row_begin]++] = q;
  }
  std::vector<std::int32_t> col_of(static_cast<std::size_t>(count));
  std::vector<char> keep(static_cast<std::size_t>(count));
  std::int64_t duplicate_at = -1;
#pragma omp parallel for schedule(dynamic, 64) reduction(max : duplicate_at)
  for (std::int32_t r = 0; r < rows; ++r) {
    auto first = order.begin() + start[r];
    auto last = order.begin() + start[r + 1];
    std::sort(first, last, [&](std::int64_t x, std::int64_t y) {
      return record_col(records.record(x)) < record_col(records.record(y));
    });
    for (std::int64_t s = start[r]; s < start[r + 1]; ++s) {
      col_of[s] = record_col(records.record(order[s]));
      keep[s] = !all_zero(records.values(order[s]), mm);
      if (s > start[r] && col_of[s] == col_of[s - 1]) duplicate_at = std::max(duplicate_at, s);
    }
  }
  if (duplicate_at >= 0)
    throw InputError(duplicate_message(record_row(records.record(order[duplicate_at])), col_of[duplicate_at]));

  BlockMatrix matrix;
  matrix.shape = records.shape;
  matrix.row_begin = row_begin;
  matrix.row_end = row_end;
  matrix.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int32_t r = 0; r < rows; ++r) {
    std::int64_t kept = 0;
    for (std::int64_t s = start[r]; s < start[r + 1]; ++s) kept += keep[s];
    matrix.row_ptr[r + 1] = matrix.row_ptr[r] + kept;
  }
  const std::int64_t blocks = matrix.row_ptr[rows];
  const std::int32_t words = role == OperandRole::plain ? 0 : mask_words(m);
  matrix.col.resize(static_cast<std::size_t>(blocks));
  matrix.values.resize(static_cast<std::size_t>(blocks * mm));
  matrix.masks.assign(static_cast<std::size_t>(blocks * words), 0);
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int32_t r = 0; r < rows; ++r) {
    std::int64_t b = matrix.row_ptr[r];
    for (std::int64_t s = start[r]; s < start[r + 1]; ++s) {
      if (!keep[s]) continue;
      const std::uint16_t* v = records.values(order[s]);
      matrix.col[b] = col_of[s];
      std::memcpy(matrix.values.data() + b * mm, v, static_cast<std::size_t>(mm) * 2);
      if (words > 0) compute_mask(v, m, role, matrix.masks.data() + b * words);
      ++b;
    }
  }
  if (role == OperandRole::right) build_csc(matrix);
  return matrix;
}

std::vector<std::byte> pack_rows(const BlockMatrix& matrix, const std::vector<std::int32_t>& rows) {
  const std::int64_t mm = matrix.shape.block_values();
  const std::int64_t stride = record_bytes<std::uint16_t>(matrix.shape.m);
  std::int64_t blocks = 0;
  for (std::int32_t i : rows) blocks += matrix.row_ptr[i - matrix.row_begin + 1] - matrix.row_ptr[i - matrix.row_begin];
  std::vector<std::byte> out(static_cast<std::size_t>(blocks * stride));
  std::byte* rec = out.data();
  for (std::int32_t i : rows) {
    const std::int32_t r = i - matrix.row_begin;
    for (std::int64_t b = matrix.row_ptr[r]; b < matrix.row_ptr[r + 1]; ++b, rec += stride) {
      set_record_index(rec, i, matrix.col[b]);
      std::memcpy(rec + 8, matrix.block_values(b), static_cast<std::size_t>(mm) * 2);
    }
  }
  return out;
}

}  // namespace blockmm::partition
