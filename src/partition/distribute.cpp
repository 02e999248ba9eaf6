#include "partition/distribute.hpp"

#include <chrono>
#include <cstring>

#include "operands/host_build.hpp"
#include "partition/work.hpp"

namespace blockmm::partition {
namespace {

// Seconds since the last call (or construction).
class Lap {
 public:
  double operator()() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Whether several ranks of this node all say `mine` (collective): the same answer on every rank
// of a node.
bool whole_node_agrees(bool mine, const comm::Communicator& comm) {
  const std::vector<std::int64_t> flags = comm.gather_all(std::int64_t{mine ? 1 : 0});
  int node_ranks = 0;
  bool all = true;
  for (int r = 0; r < comm.size(); ++r) {
    if (!comm.same_node(r)) continue;
    ++node_ranks;
    all = all && flags[static_cast<std::size_t>(r)] == 1;
  }
  return node_ranks > 1 && all;
}

// Records of block-rows [row_begin, row_end) of `grouped` (contiguous there: grouped by row).
InputRecords row_slice(const GroupedRecords& grouped, std::int32_t row_begin, std::int32_t row_end) {
  InputRecords slice;
  slice.shape = grouped.records.shape;
  const std::int64_t stride = grouped.records.stride();
  const std::int64_t first = grouped.row_start[static_cast<std::size_t>(row_begin)];
  const std::int64_t last = grouped.row_start[static_cast<std::size_t>(row_end)];
  slice.bytes.resize(static_cast<std::size_t>((last - first) * stride));
  if (last > first) std::memcpy(slice.bytes.data(), grouped.records.record(first), slice.bytes.size());
  return slice;
}

// Every rank on one node, both files readable by each: each rank reads the keys of its share
// (for the work estimate), then takes its A rows and the B rows it needs from the files itself,
// in one scan of each. Nothing but per-row counts crosses between ranks.
Distribution distribute_within_node(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm,
                                    Distribution d, RowSharing sharing, bool may_share_b, bool b_in_file) {
  const std::int32_t p = a_file.header().shape().block_rows();
  d.method = DistributionMethod::rows_scanned;
  Lap lap;
  RecordKeys a_keys, b_keys;
  comm.run_phase([&] {
    const io::RecordRange a_share = io::record_share(a_file.header().k, comm.rank(), comm.size());
    const io::RecordRange b_share = io::record_share(b_file.header().k, comm.rank(), comm.size());
    a_keys.resize(static_cast<std::size_t>(2 * a_share.count));
    b_keys.resize(static_cast<std::size_t>(2 * b_share.count));
    a_file.read_keys(a_share, a_keys.data());
    b_file.read_keys(b_share, b_keys.data());
  });
  d.read_seconds = lap();
  GroupedRecords a_rows, b_rows;
  std::vector<char> owned(static_cast<std::size_t>(p), 0), needed;
  std::vector<std::int64_t> b_counts;
  comm.run_phase([&] {
    const std::vector<std::int64_t> a_counts = global_row_counts(a_keys, p, comm);
    b_counts = global_row_counts(b_keys, p, comm);
    const std::vector<std::int64_t> work = global_row_work(a_keys, b_counts, comm);
    d.bounds = balanced_ranges(work, comm.size());
    d.shared = shared_regions(work, d.bounds, sharing);
    a_keys = {};
    b_keys = {};
    const int r = comm.rank();
    const std::int32_t lo = d.bounds[r], hi = d.bounds[r + 1];
    // This rank's rows, and its neighbours' regions next to them.
    const std::int32_t from = d.shared.empty() || r == 0 ? lo : d.shared.tail_begin[r - 1];
    const std::int32_t to = d.shared.empty() || r + 1 == comm.size() ? hi : d.shared.head_end[r + 1];
    std::fill(owned.begin() + from, owned.begin() + to, 1);
    a_rows = gather_rows(a_file, owned, a_counts);
    // The B rows these A blocks reference, and its own rows (their duplicates are its to find).
    needed = referenced_columns(a_rows.records, p);
    if (from < lo) {
      d.below = std::make_unique<MemoryRecordSource>(row_slice(a_rows, from, lo));
      d.below_spec = {from, lo, OperandRole::left, d.a_spec.duplicate_message};
    }
    if (hi < to) {
      d.above = std::make_unique<MemoryRecordSource>(row_slice(a_rows, hi, to));
      d.above_spec = {hi, to, OperandRole::left, d.a_spec.duplicate_message};
    }
    if (from < lo || hi < to) {
      std::vector<char> mine(static_cast<std::size_t>(p), 0);
      std::fill(mine.begin() + lo, mine.begin() + hi, 1);
      a_rows = keep_rows(std::move(a_rows), mine);
    }
  });
  // Ranks whose A rows reach every row of B that holds blocks all need the whole of B: where
  // they may, the node's first rank alone reads it (and finds all of its duplicates), so that
  // the others never hold a copy they would drop for the shared one.
  bool all_of_b = true;
  for (std::int32_t row = 0; row < p && all_of_b; ++row) all_of_b = b_counts[row] == 0 || needed[row] != 0;
  comm.run_phase([&] { d.b_shared_on_node = whole_node_agrees(may_share_b && all_of_b && !b_in_file, comm); });
  const bool reads_b = (!d.b_shared_on_node || comm.rank() == comm.node_leader()) && !b_in_file;
  const std::int32_t lo = d.bounds[comm.rank()], hi = d.bounds[comm.rank() + 1];
  std::vector<char> wanted(needed);  // its own rows too: their duplicates are its to find
  std::fill(wanted.begin() + lo, wanted.begin() + hi, 1);
  comm.run_phase([&] {
    if (reads_b) b_rows = gather_rows(b_file, wanted, b_counts);
  });
  d.exchange_seconds = lap();
  d.a_spec.row_begin = lo;
  d.a_spec.row_end = hi;
  comm.run_phase([&] {
    if (!reads_b) return;
    // Each rank finds the duplicates of its own rows, or the node's first rank those of all.
    if (d.b_shared_on_node)
      check_duplicates(b_rows, 0, p, d.b_spec.duplicate_message);
    else
      check_duplicates(b_rows, lo, hi, d.b_spec.duplicate_message);
    b_rows = keep_rows(std::move(b_rows), needed);
  });
  d.build_seconds = lap();
  d.a = std::make_unique<MemoryRecordSource>(std::move(a_rows.records));
  b_rows.records.shape = b_file.header().shape();  // (also where this rank read none)
  d.b = std::make_unique<MemoryRecordSource>(std::move(b_rows.records));
  if (b_in_file) {
    d.b_in_file = true;
    d.b = std::make_unique<io::FileRecordSource>(b_file, io::RecordRange{0, b_file.header().k});
    for (std::int32_t row = 0; row < p; ++row) d.b_records += wanted[row] != 0 ? b_counts[row] : 0;
    d.b_rows = std::move(wanted);
  }
  return d;
}

}  // namespace

std::string to_string(DistributionMethod method) {
  switch (method) {
    case DistributionMethod::one_rank: return "one rank";
    case DistributionMethod::whole_inputs: return "whole inputs on every rank";
    case DistributionMethod::rows_scanned: return "rows scanned from the files";
    case DistributionMethod::records_exchanged: return "records exchanged";
  }
  return "?";
}

DuplicateMessage duplicate_message(const io::InputFile& file) {
  return [&file](std::int32_t i, std::int32_t j) {
    const auto [fi, fj] = file.file_block(i, j);
    return file.path() + ": duplicate block (" + std::to_string(fi) + ", " + std::to_string(fj) + ")" +
           file.locate_duplicate(i, j);
  };
}

Distribution distribute(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm,
                        RowSharing sharing, bool may_share_b, bool b_in_file) {
  const MatrixShape shape = a_file.header().shape();
  const std::int32_t p = shape.block_rows();
  Distribution d;
  d.a_spec = {0, p, OperandRole::left, duplicate_message(a_file)};
  d.b_spec = {0, p, OperandRole::right, duplicate_message(b_file)};
  if (comm.size() == 1) {
    d.bounds = {0, p};
    d.a = std::make_unique<io::FileRecordSource>(a_file, io::RecordRange{0, a_file.header().k});
    d.b = std::make_unique<io::FileRecordSource>(b_file, io::RecordRange{0, b_file.header().k});
    d.b_in_file = b_in_file;
    d.b_records = b_file.header().k;
    return d;
  }

  if (comm.nodes() == 1 && a_file.readable_by_every_rank() && b_file.readable_by_every_rank())
    return distribute_within_node(a_file, b_file, comm, std::move(d), sharing, may_share_b, b_in_file);

  // Across nodes: each rank reads its share of both files, the records travel to the owner of
  // their block-row as bytes, and each rank fetches the B rows its panel needs from their owners.
  d.method = DistributionMethod::records_exchanged;
  Lap lap;
  InputRecords a_records, b_records;
  comm.run_phase([&] {
    a_records = a_file.read_records(io::record_share(a_file.header().k, comm.rank(), comm.size()));
    b_records = b_file.read_records(io::record_share(b_file.header().k, comm.rank(), comm.size()));
  });
  d.read_seconds = lap();
  comm.run_phase([&] {
    const auto b_rows = global_row_counts(record_keys(b_records), p, comm);
    const auto work = global_row_work(record_keys(a_records), b_rows, comm);
    d.bounds = balanced_ranges(work, comm.size());
    a_records = redistribute_by_row(a_records, d.bounds, comm, d.exchanged);
    b_records = redistribute_by_row(b_records, d.bounds, comm, d.exchanged);
  });
  d.exchange_seconds = lap();
  const std::int32_t lo = d.bounds[comm.rank()];
  const std::int32_t hi = d.bounds[comm.rank() + 1];
  d.a_spec.row_begin = lo;
  d.a_spec.row_end = hi;

  // The owner of each B row finds its duplicates (a rank may never fetch some rows) and serves
  // the rows that panels reference.
  BlockMatrix b_owned;
  comm.run_phase([&] {
    b_owned = operands::build_block_matrix(b_records, lo, hi, OperandRole::plain, d.b_spec.duplicate_message);
    b_records = {};
  });
  d.build_seconds = lap();
  const std::vector<char> needed = referenced_columns(a_records, p);
  comm.run_phase([&] { b_records = fetch_rows(b_owned, needed, d.bounds, comm, d.exchanged); });
  d.exchange_seconds += lap();
  // Ranks of one node that each hold all of B share one copy; the others' copies are dropped by
  // the caller. A rank holds all of it where it holds as many blocks as the owners kept (a rank's
  // are a subset of those: the file's blocks less the all-zero ones).
  comm.run_phase([&] {
    const std::int64_t kept = comm.sum(b_owned.blocks());
    d.b_shared_on_node = whole_node_agrees(may_share_b && b_records.size() == kept, comm);
  });
  d.a = std::make_unique<MemoryRecordSource>(std::move(a_records));
  d.b = std::make_unique<MemoryRecordSource>(std::move(b_records));
  return d;
}

}  // namespace blockmm::partition
