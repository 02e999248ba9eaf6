// Placing input records on the ranks that use them. Ranks all on one node share the page cache:
// each takes its A rows and the B rows it needs from the files itself (gather_rows), and nothing
// but per-row counts moves between them. Across nodes, A and B records travel as bytes to the
// owner of their block-row, then each rank fetches the B rows its A panel touches from their
// owners. (Sending record numbers between the ranks of a node instead of the records' bytes is
// slower than either: it adds per-record loops and sorts, and leaves the build gathering its
// values in file order, at random.)
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"
#include "io/input_file.hpp"
#include "partition/work.hpp"

namespace blockmm::partition {

// Bytes this rank sent to other ranks (what it received is counted by its senders).
struct ExchangeCounters {
  std::int64_t bytes_sent = 0;      // all of it
  std::int64_t bytes_received = 0;  // all of it
  // Input records (8 + 2 m^2 bytes each): none where every rank is on one node.
  std::int64_t record_bytes_within_node = 0;
  std::int64_t record_bytes_between_nodes = 0;
  // Block-rows asked for (fetch_rows).
  std::int64_t index_bytes_within_node = 0;
  std::int64_t index_bytes_between_nodes = 0;
};

// Keys of records in memory (what read_keys gives for records still in the file).
RecordKeys record_keys(const InputRecords& records);

// Across nodes. Collective. Sends every record to the rank whose range [bounds[r], bounds[r+1])
// holds its block-row, as bytes.
InputRecords redistribute_by_row(const InputRecords& records, const std::vector<std::int32_t>& bounds,
                                 const comm::Communicator& comm, ExchangeCounters& counters);

// Across nodes. Collective. The rows of B named in `needed` (a flag per block-row), gathered from
// their owners' `owned` matrices (rows [bounds[rank], bounds[rank+1])).
InputRecords fetch_rows(const BlockMatrix& owned, const std::vector<char>& needed,
                        const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                        ExchangeCounters& counters);

// Ranks that all share one node (and files every rank can read) move no record and no record
// number between them: each takes the records it needs from the files itself, in one filtered
// scan by its threads. Records ordered by block-row, then block-column (as the operand build
// orders them, so that it finds them sorted): row i's blocks at [row_start[i], row_start[i + 1]).
struct GroupedRecords {
  InputRecords records;
  std::vector<std::int64_t> row_start;  // block_rows + 1
};

// The records of `file` whose block-row is flagged in `wanted` (a flag per block-row): the
// whole file read once, in pieces, by the rank's threads (one where the file's reads are not
// thread-safe). `row_counts`: the file's blocks per block-row (from the keys of every share); a
// file that disagrees with them throws.
GroupedRecords gather_rows(io::InputFile& file, const std::vector<char>& wanted,
                           const std::vector<std::int64_t>& row_counts);

// Throws InputError(duplicate_message(i, j)) for the largest (i, j) with i in [row_begin, row_end)
// that occurs twice in `grouped`, as index_rows does.
void check_duplicates(const GroupedRecords& grouped, std::int32_t row_begin, std::int32_t row_end,
                      const DuplicateMessage& duplicate_message);

// `grouped` without the rows not flagged in `keep`.
GroupedRecords keep_rows(GroupedRecords grouped, const std::vector<char>& keep);

// The smallest block (i, j), as i * 2^32 + j, that the records of all ranks hold twice, or -1.
// Collective. Each key goes to the rank the key picks, which sorts what it receives: memory in
// proportion to the records, never to n.
std::int64_t first_duplicate_block(const InputRecords& records, const comm::Communicator& comm);

// A flag per block-row: the block-columns that `records` reference.
std::vector<char> referenced_columns(const InputRecords& records, std::int32_t block_rows);

}  // namespace blockmm::partition
