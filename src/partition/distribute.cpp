#include "partition/distribute.hpp"

#include <chrono>

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

}  // namespace

DuplicateMessage duplicate_message(const io::InputFile& file) {
  return [&file](std::int32_t i, std::int32_t j) {
    const auto [fi, fj] = file.file_block(i, j);
    return file.path() + ": duplicate block (" + std::to_string(fi) + ", " + std::to_string(fj) + ")" +
           file.locate_duplicate(i, j);
  };
}

Distribution distribute(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm) {
  const MatrixShape shape = a_file.header().shape();
  const std::int32_t p = shape.block_rows();
  Distribution d;
  d.a_spec = {0, p, OperandRole::left, duplicate_message(a_file)};
  d.b_spec = {0, p, OperandRole::right, duplicate_message(b_file)};
  if (comm.size() == 1) {
    d.bounds = {0, p};
    d.a = std::make_unique<io::FileRecordSource>(a_file, io::RecordRange{0, a_file.header().k});
    d.b = std::make_unique<io::FileRecordSource>(b_file, io::RecordRange{0, b_file.header().k});
    return d;
  }

  // Each rank reads its share of both files, then balanced contiguous block-row ranges by work.
  Lap lap;
  InputRecords a_records, b_records;
  comm.run_phase([&] {
    a_records = a_file.read_records(io::record_share(a_file.header().k, comm.rank(), comm.size()));
    b_records = b_file.read_records(io::record_share(b_file.header().k, comm.rank(), comm.size()));
  });
  d.read_seconds = lap();
  comm.run_phase([&] {
    const auto b_rows = global_row_counts(b_records, comm);
    const auto work = global_row_work(a_records, b_rows, comm);
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
  std::vector<char> needed(static_cast<std::size_t>(p), 0);
  for (std::int64_t q = 0; q < a_records.size(); ++q) needed[static_cast<std::size_t>(record_col(a_records.record(q)))] = 1;
  comm.run_phase([&] { b_records = fetch_rows(b_owned, needed, d.bounds, comm, d.exchanged); });
  d.exchange_seconds += lap();
  d.a = std::make_unique<MemoryRecordSource>(std::move(a_records));
  d.b = std::make_unique<MemoryRecordSource>(std::move(b_records));
  return d;
}

}  // namespace blockmm::partition
