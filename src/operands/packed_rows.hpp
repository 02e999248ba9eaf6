// A right operand's block-rows packed into one flat buffer that several processes can map (the
// copy of B that the ranks of a node share): a header, then row pointers, columns, values and
// masks, each from a 64-byte boundary, and a view that reads them in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/block_matrix.hpp"

namespace blockmm::operands {

// Bytes of `rows` packed.
std::int64_t packed_bytes(const BlockRowsView& rows);
// Bytes of B's rows [0, p) with at most `blocks` blocks kept, packed: a bound known before B is built.
std::int64_t packed_bytes_bound(MatrixShape shape, std::int64_t blocks);
// Packs `rows` into `to` (packed_bytes(rows) bytes), copying with the calling thread's OpenMP team.
void pack_rows(const BlockRowsView& rows, std::byte* to);
// A view of packed rows in place (`bytes` is what the buffer holds: a header claiming more is an
// internal error).
BlockRowsView packed_rows_view(const std::byte* packed, std::int64_t bytes);

}  // namespace blockmm::operands
