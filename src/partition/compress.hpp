// From unordered records to compressed block matrices: CSR over a range of block-rows (and CSC
// for right operands), duplicate detection, all-zero blocks dropped, operand masks computed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/block_matrix.hpp"

namespace blockmm::partition {

enum class OperandRole {
  left,   // A: masks of non-zero columns; CSR only
  right,  // B: masks of non-zero rows; CSR and CSC
  plain,  // masks and CSC skipped (ownership checks, tools)
};

// Gives the text of the error for a duplicate block (i, j), e.g. naming the file and records.
using DuplicateMessage = std::function<std::string(std::int32_t i, std::int32_t j)>;

// Every record's block-row must lie in [row_begin, row_end). Throws InputError on a duplicate.
BlockMatrix build_block_matrix(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message);

}  // namespace blockmm::partition
