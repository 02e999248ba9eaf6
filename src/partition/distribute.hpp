// Which records each rank builds its operands from: output block-rows split over the ranks by
// work, this rank's A rows, and the B rows its panel references. The driver only sequences
// phases; this is the distribution algorithm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/record_source.hpp"
#include "io/input_file.hpp"
#include "partition/exchange.hpp"
#include "partition/row_sharing.hpp"

namespace blockmm::partition {

// How the ranks came by their records (for --stats).
enum class DistributionMethod {
  one_rank,           // the whole files, read where the backend builds
  whole_inputs,       // every rank of one node builds both whole (multiply/whole_inputs.hpp)
  rows_scanned,       // every rank of one node scans the files for its rows
  records_exchanged,  // across nodes: shares read, records sent to their owners through MPI
};
std::string to_string(DistributionMethod method);

struct Distribution {
  DistributionMethod method = DistributionMethod::one_rank;
  std::vector<std::int32_t> bounds;  // ranks + 1: rank r owns output block-rows [bounds[r], bounds[r+1])
  // This rank's A rows and the B rows its panel needs, with the rows each covers. On one rank
  // they read straight from the files, so that a backend can stream them where it builds; on
  // several they are held in memory (scanned from the files by this rank when every rank is on
  // one node, received through MPI across nodes).
  std::unique_ptr<RecordSource> a;
  std::unique_ptr<RecordSource> b;
  OperandSpec a_spec;
  OperandSpec b_spec;
  // Rows shared with the neighbouring ranks (row_sharing.hpp; empty regions: none): the
  // records of rank r-1's tail region (`below`, rows [tail_begin[r-1], bounds[r])) and of rank
  // r+1's head region (`above`), which this rank may compute for them. `b` holds the B rows
  // they reference too. Null where there is no such region.
  SharedRegions shared;
  std::unique_ptr<RecordSource> below;
  std::unique_ptr<RecordSource> above;
  OperandSpec below_spec;
  OperandSpec above_spec;
  // Whether the ranks of this node read one copy of B (multiply/shared_right_operand.hpp): asked
  // for, and every rank of the node (several of them) needs all of B's records, so that their B
  // is the same. Then only the node's first rank holds `b` (all of B, whose duplicates it finds)
  // where the ranks scan the files; the others hold none and read none of B.
  bool b_shared_on_node = false;
  // Where B is left in its file (distribute's `b_in_file`, honoured where the ranks take their
  // rows from the files): `b` reads the whole file, of which this rank's records are those of the
  // rows flagged here (empty: every row), `b_records` of them. Their duplicates are found where
  // they are built.
  bool b_in_file = false;
  std::vector<char> b_rows;
  std::int64_t b_records = 0;
  ExchangeCounters exchanged;
  // Seconds spent here, by phase (all zero on one rank: the backend's build reads).
  double read_seconds = 0;      // this rank's share (its keys, on one node)
  double exchange_seconds = 0;  // on one node: the scans of the files
  double build_seconds = 0;     // finding the duplicates of this rank's B rows
};

// "FILE: duplicate block (i, j) at records X and Y ...": the message for a duplicate in `file`
// (which must outlive the function returned).
DuplicateMessage duplicate_message(const io::InputFile& file);

// Collective. Duplicate blocks anywhere in A or B are reported (InputError naming the file and
// records) by the time every rank has built its operands from the result. `sharing` asks for rows
// shared with the neighbours (row_sharing.hpp: about a fraction of a rank's work at each end of
// its panel, where there is enough work); they are shared only where every rank is on one node.
// `may_share_b`: this rank may read B from one copy its node shares (Distribution::b_shared_on_node).
// `b_in_file`: leave B in its file where the ranks read the files themselves (the same on every rank).
Distribution distribute(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm,
                        RowSharing sharing = {}, bool may_share_b = false, bool b_in_file = false);

}  // namespace blockmm::partition
