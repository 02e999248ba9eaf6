// Work estimate and rank ranges. work(i) = sum over A(i,k) of the blocks in B's row k: the
// block products of output row i (plus one per A block, so rows without products still
// spread). Ranges are contiguous and ordered, so the output file comes out sorted.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"

namespace blockmm::partition {

// Keys of records: keys[2q] = block-row, keys[2q + 1] = block-column of record q (validated:
// both in [0, block_rows)). The distribution places records by these alone.
using RecordKeys = std::vector<std::int32_t>;

// Blocks per block-row (block_rows of them) over every rank's records.
std::vector<std::int64_t> global_row_counts(const RecordKeys& keys, std::int32_t block_rows,
                                            const comm::Communicator& comm);

// work(i) for every block-row of C, summed over every rank's A records.
std::vector<std::int64_t> global_row_work(const RecordKeys& a, const std::vector<std::int64_t>& b_row_counts,
                                          const comm::Communicator& comm);

// parts + 1 bounds: part r owns block-rows [bounds[r], bounds[r+1]). Each part's work is as
// close to total/parts as contiguous ranges allow.
std::vector<std::int32_t> balanced_ranges(const std::vector<std::int64_t>& work, int parts);
std::vector<std::int32_t> equal_row_ranges(std::int32_t rows, int parts);

// Work of each part under `bounds`.
std::vector<std::int64_t> work_per_part(const std::vector<std::int64_t>& work, const std::vector<std::int32_t>& bounds);

// max / mean of the parts' work (1 when perfectly balanced, or when there is no work).
double imbalance(const std::vector<std::int64_t>& part_work);

}  // namespace blockmm::partition
