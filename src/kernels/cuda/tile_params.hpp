// What the numeric kernels read of the operands, and one chunk's place in the output: the
// sparse tile kernels (tile_kernel.cuh) take it whole, the dense path its operand pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/sparse_plan.hpp"

namespace blockmm::kernels::cuda {

struct TileParams {
  // A panel in CSR: row r's blocks are [a_row_ptr[r], a_row_ptr[r+1]); values in CSR order.
  const std::int32_t* a_row_ptr;
  const std::int32_t* a_col;
  const std::uint16_t* a_values;
  std::int32_t a_row_begin;
  // B in CSC over all block-columns; entries name the block's index in CSR-ordered b_values.
  const std::int32_t* b_col_ptr;
  const std::int32_t* b_csc_row;
  const std::int32_t* b_csc_block;
  const std::uint16_t* b_values;
  // This chunk: its work units, the block-column of each of its tiles, and its output records.
  const WorkUnit* units;
  const std::int32_t* tile_col;  // indexed by tile - chunk_first_tile
  std::int64_t chunk_first_tile;
  std::byte* out;                // record of tile t at (t - chunk_first_tile) * record_bytes
  std::int32_t m;
  unsigned int* zero_tiles;      // count of all-zero tiles: must stay 0 (symbolic phase is exact)
};

}  // namespace blockmm::kernels::cuda
