// From unordered records to compressed block matrices: CSR over a range of block-rows (and CSC
// for right operands), duplicate detection, all-zero blocks dropped, operand masks computed.
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

// Every record's block-row must lie in [row_begin, row_end). Throws InputError on a duplicate.
BlockMatrix build_block_matrix(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message);

// Block products (pairs A(i,k), B(k,j)) of a panel whose B rows are `b`'s: the work every
// backend must do.
std::int64_t count_block_products(const BlockMatrix& a, const BlockMatrix& b);

}  // namespace blockmm::operands
