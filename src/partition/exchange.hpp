// Placing input records on the ranks that use them: A and B records to the owner of their
// block-row, then each rank fetches only the B rows its A panel touches. Ranks of one node share
// the page cache, so between them a record travels as its number in the file (with its key) and
// the receiving rank reads it itself; only ranks of other nodes are sent the records' bytes.
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
  // Input records (8 + 2 m^2 bytes each): never to a rank of the same node, by design.
  std::int64_t record_bytes_within_node = 0;
  std::int64_t record_bytes_between_nodes = 0;
  // Record numbers with their keys, and block-rows asked for.
  std::int64_t index_bytes_within_node = 0;
  std::int64_t index_bytes_between_nodes = 0;
};

// The records of one operand that a rank holds: by number in the file (those that ranks of this
// node placed here, ascending, with their keys where kept), then the bytes of records from ranks
// of other nodes.
struct PlacedRecords {
  std::vector<std::int64_t> numbers;
  RecordKeys keys;  // 2 per number, or empty
  InputRecords received;
  std::int64_t size() const { return static_cast<std::int64_t>(numbers.size()) + received.size(); }
};

// Collective. Sends each record of `share` (whose keys are `keys`) to the rank whose range
// [bounds[r], bounds[r+1]) holds its block-row: by number to ranks of this node where the file
// is readable_by_every_rank(), else as bytes.
PlacedRecords place_by_row(io::InputFile& file, io::RecordRange share, const RecordKeys& keys,
                           const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                           ExchangeCounters& counters);

// A rank's owned rows of B (placed by place_by_row), ordered by block-row, then block-column.
struct RowIndex {
  std::int32_t row_begin = 0;
  std::vector<std::int64_t> row_ptr;  // rows + 1
  // Per block: its place in the PlacedRecords (numbers first, then received).
  std::vector<std::int64_t> source;
};

// Orders `owned` (keys kept, rows in [row_begin, row_end)) by block. Throws
// InputError(duplicate_message(i, j)) for the largest (i, j) that occurs twice, as the host build does.
RowIndex index_rows(const PlacedRecords& owned, std::int32_t row_begin, std::int32_t row_end,
                    const DuplicateMessage& duplicate_message);

// Collective. The B rows flagged in `needed` (a flag per block-row), from their owners (each
// rank's `owned` and `index` for its rows [bounds[rank], bounds[rank+1])): numbers of the
// records a rank of this node may read itself, bytes of the others. Keys are not kept.
// `file` is the one `owned` was placed from.
PlacedRecords fetch_rows(io::InputFile& file, const PlacedRecords& owned, const RowIndex& index,
                         const std::vector<char>& needed, const std::vector<std::int32_t>& bounds,
                         const comm::Communicator& comm, ExchangeCounters& counters);

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

// A flag per block-row: the block-columns that `records` reference.
std::vector<char> referenced_columns(const InputRecords& records, std::int32_t block_rows);

}  // namespace blockmm::partition
