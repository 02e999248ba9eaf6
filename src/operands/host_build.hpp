// From unordered records to compressed block matrices: CSR over a range of block-rows (and CSC
// for right operands), duplicate detection, all-zero blocks dropped, operand masks computed.
// Records that arrive in CSR order (files written row-major) are built in one pass over them
// (operands/sorted_build.hpp), read from a file in pieces where they come from one.
// The host implementation of a backend's build: the cpu and reference backends use it, and the
// cuda backend where its device build would not fit the memory budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/record_source.hpp"

namespace blockmm::operands {

using blockmm::DuplicateMessage;
using blockmm::OperandRole;

// Stable LSD radix sort of one row's keys by block-column (a key's high 32 bits), 8 bits a pass
// over the `column_bits` that columns can use; passes where every key has the same digit are
// skipped. Keys arrive in record order, so equal columns (duplicates, an error anyway) stay in
// it. `scratch` holds at least `n` keys.
void sort_row_by_column(std::uint64_t* keys, std::int64_t n, int column_bits, std::uint64_t* scratch);

// Every record's block-row must lie in [row_begin, row_end). Throws InputError on a duplicate.
// A right operand gets its CSC too unless `with_csc` is false (the host kernels never read it;
// the cuda backend's upload of a host build does).
BlockMatrix build_block_matrix(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message, bool with_csc = true);

// The same from a source. Records that the source reads where they lie (a file, not memory it
// holds) and that arrive in CSR order are read in pieces by the threads straight into the
// matrix, with no copy of them in memory; others, and any that the one-pass build refuses (out of
// order, a read that fails), are taken whole and built as above, with the same errors.
BlockMatrix build_block_matrix(RecordSource& source, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message, bool with_csc = true);

// Block products (pairs A(i,k), B(k,j)) of a panel whose B rows are `b`'s: the work every
// backend must do.
std::int64_t count_block_products(const BlockMatrix& a, const BlockRowsView& b);

// The same, per block-row of `a` (a.rows_held() entries).
std::vector<std::int64_t> count_row_products(const BlockMatrix& a, const BlockRowsView& b);

// Block-rows [row_begin, row_end) of a left operand (no CSC) as a matrix of their own.
BlockMatrix slice_rows(const BlockMatrix& a, std::int32_t row_begin, std::int32_t row_end);

// A matrix of its own holding `rows` (CSR, values and masks; no CSC, which the host kernels never read).
BlockMatrix copy_rows(const BlockRowsView& rows);

// Bytes a matrix holds, and a bound on what building one from `records` records over `rows`
// block-rows holds at its peak (the records, then the matrix beside them).
std::int64_t matrix_bytes(const BlockMatrix& matrix);
std::int64_t build_bytes(MatrixShape shape, std::int64_t records, std::int64_t rows);

}  // namespace blockmm::operands
