// B cut by block-columns into panels, for a rank whose B does not fit beside A on one backend (a
// GPU's memory) or in the host memory it may use. Each panel is a RecordSource that a backend
// builds from: over B's records held in memory, through an index made once; or over B's file,
// read whole in bounded pieces at each build, keeping the panel's records (one pass over B's
// rows a panel, and B never whole in host memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/record_source.hpp"

namespace blockmm::partition {

// Per block-column of the B records taken: their blocks, and their work (each block meets the A
// blocks of the A column equal to its row; plus one, so that empty columns still spread).
struct ColumnCounts {
  std::vector<std::int64_t> blocks;
  std::vector<std::int64_t> work;
};

// Blocks per block-column of `records`: one pass, in bounded pieces.
std::vector<std::int64_t> blocks_per_column(const RecordSource& records);

// One pass over `b`: the counts of its records whose block-row is flagged in `rows` (empty:
// every row), against A's blocks per column `a_per_column`.
ColumnCounts column_counts(const RecordSource& b, const std::vector<char>& rows,
                           const std::vector<std::int64_t>& a_per_column);

// Bounds of contiguous block-column ranges (panels + 1 of them, more, or fewer): `panels` of
// near-equal work, each cut again where it holds more than `max_blocks` blocks (0: no bound; a
// column alone may hold more); a range without blocks is merged into its neighbour (one range
// where no column holds a block), so that no panel is built, or B's file read, for nothing.
std::vector<std::int32_t> column_cut(const ColumnCounts& counts, int panels, std::int64_t max_blocks);

// Each panel's records in column order, over B's records in memory.
std::vector<std::unique_ptr<RecordSource>> panels_in_memory(std::shared_ptr<const InputRecords> records,
                                                            const std::vector<std::int32_t>& cut);

// The records of `file` (B's records where they lie, read in pieces) in the rows flagged in
// `rows` (empty: every row), `records` of them, read in one pass: the rank's B, left in its file
// (named `name` in messages).
std::unique_ptr<RecordSource> rows_in_file(std::shared_ptr<RecordSource> file, std::vector<char> rows, std::int64_t records,
                                           std::string name);

// Each panel's records in column order, over `file` (B's records where they lie, read in
// pieces, named `name` in messages), those of the rows flagged in `rows` (empty: every row);
// `counts` sizes each panel. Reads continue a scan where the last ended, so that a backend that
// reads a panel in order (not concurrently) makes one pass. The file is read again for each
// panel: a pass that finds more or fewer of the panel's records than counted (the file changed
// in between) throws InputError naming the file. A pass read in order ends with the rest of the
// file, which must hold none of the panel's records.
std::vector<std::unique_ptr<RecordSource>> panels_in_file(std::shared_ptr<RecordSource> file, std::vector<char> rows,
                                                          const std::vector<std::int32_t>& cut,
                                                          const ColumnCounts& counts, std::string name);

}  // namespace blockmm::partition
