// In-memory block matrices: the unordered records a rank holds after reading, and the
// compressed (CSR / CSC) form the kernels consume. Knows nothing of files, MPI or devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/large_buffer.hpp"
#include "core/record_layout.hpp"

namespace blockmm {

// Blocks in record layout, in no particular order (as read, or as received from other ranks).
template <typename Value>
struct RecordBuffer {
  MatrixShape shape;
  LargeVector<std::byte> bytes;

  std::int64_t stride() const { return record_bytes<Value>(shape.m); }
  std::int64_t size() const { return stride() > 0 ? static_cast<std::int64_t>(bytes.size()) / stride() : 0; }
  const std::byte* record(std::int64_t r) const { return bytes.data() + r * stride(); }
  std::byte* record(std::int64_t r) { return bytes.data() + r * stride(); }
  const Value* values(std::int64_t r) const { return reinterpret_cast<const Value*>(record(r) + 8); }
};

using InputRecords = RecordBuffer<std::uint16_t>;
using OutputRecords = RecordBuffer<std::uint32_t>;

// Bits of a block's non-zero rows or columns, ceil(m / 64) words each. With non-negative
// values, C(i,j) has a non-zero iff some k has colmask(A(i,k)) & rowmask(B(k,j)) != 0, which
// makes the symbolic phase exact: output offsets are known before any value is computed.
inline std::int32_t mask_words(std::int32_t m) { return (m + 63) / 64; }

// A matrix's non-zero blocks over block-rows [row_begin, row_end), values in CSR order
// (block b's values at values[b * m * m]). All-zero input blocks are dropped on build: they
// contribute nothing to any product.
struct BlockMatrix {
  MatrixShape shape;
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;

  // CSR: blocks of row i are [row_ptr[i - row_begin], row_ptr[i - row_begin + 1]), columns ascending.
  std::vector<std::int64_t> row_ptr;
  LargeVector<std::int32_t> col;
  LargeVector<std::uint16_t> values;

  // Per block, mask_words(m) words: the non-zero columns when the matrix is the left operand,
  // the non-zero rows when it is the right operand.
  LargeVector<std::uint64_t> masks;

  // CSC over all block-columns (built for the right operand only): rows ascending; csc_block
  // maps each entry to its CSR block index (block counts fit int32: a file's k is int32).
  std::vector<std::int64_t> col_ptr;
  LargeVector<std::int32_t> csc_row;
  LargeVector<std::int32_t> csc_block;

  std::int64_t blocks() const { return static_cast<std::int64_t>(col.size()); }
  std::int32_t rows_held() const { return row_end - row_begin; }
  const std::uint16_t* block_values(std::int64_t b) const { return values.data() + b * shape.block_values(); }
  const std::uint64_t* block_mask(std::int64_t b) const { return masks.data() + b * mask_words(shape.m); }
};

// What the host kernels read of a right operand: its CSR over block-rows [row_begin, row_end)
// through pointers, into a BlockMatrix of this rank or into memory that the ranks of a node
// share (multiply/shared_right_operand.hpp), so that they read one copy of B.
struct BlockRowsView {
  MatrixShape shape;
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  const std::int64_t* row_ptr = nullptr;  // rows + 1
  const std::int32_t* col = nullptr;
  const std::uint16_t* values = nullptr;
  const std::uint64_t* masks = nullptr;  // mask_words(m) a block: its non-zero rows
  std::int64_t block_count = 0;

  BlockRowsView() = default;
  BlockRowsView(const BlockMatrix& matrix)  // NOLINT: a matrix is read through its view
      : shape(matrix.shape),
        row_begin(matrix.row_begin),
        row_end(matrix.row_end),
        row_ptr(matrix.row_ptr.data()),
        col(matrix.col.data()),
        values(matrix.values.data()),
        masks(matrix.masks.data()),
        block_count(matrix.blocks()) {}

  std::int64_t blocks() const { return block_count; }
  std::int32_t rows_held() const { return row_end - row_begin; }
  const std::uint16_t* block_values(std::int64_t b) const { return values + b * shape.block_values(); }
  const std::uint64_t* block_mask(std::int64_t b) const { return masks + b * mask_words(shape.m); }
};

// Where each output row's tiles fall in a rank's panel: what the writers need of the symbolic
// phase (the tiles' columns stay with the backend that computes them).
struct OutputLayout {
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  std::vector<std::int64_t> row_ptr;  // rows + 1, starting at 0

  // Set where the block indices (rows here, rows and columns in the records) are compact labels
  // (partition/relabel.hpp): label x is the file's block index (*labels)[x], and the panel
  // covers the file's block-rows [file_row_begin, file_row_end). Null: indices are the file's.
  const std::vector<std::int32_t>* labels = nullptr;
  std::int32_t file_row_begin = 0;
  std::int32_t file_row_end = 0;

  std::int64_t tiles() const { return row_ptr.empty() ? 0 : row_ptr.back(); }
  std::int32_t first_file_row() const { return labels != nullptr ? file_row_begin : row_begin; }
  std::int32_t end_file_row() const { return labels != nullptr ? file_row_end : row_end; }
  // The file's block index of index x of this layout.
  std::int32_t file_index(std::int32_t x) const { return labels != nullptr ? (*labels)[static_cast<std::size_t>(x)] : x; }
};

// The non-empty output tiles of block-rows [row_begin, row_end): CSR pattern of the C panel.
struct TilePattern {
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  std::vector<std::int64_t> row_ptr;  // rows + 1, starting at 0
  LargeVector<std::int32_t> col;      // ascending within a row

  std::int64_t tiles() const { return static_cast<std::int64_t>(col.size()); }
};

}  // namespace blockmm
