#include "multiply/empty_product.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "partition/distribute.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {

std::int64_t first_duplicate_block(const InputRecords& records, const comm::Communicator& comm) {
  const int ranks = comm.size();
  std::vector<std::vector<std::uint64_t>> by_rank(static_cast<std::size_t>(ranks));
  for (std::int64_t q = 0; q < records.size(); ++q) {
    const std::uint64_t key = static_cast<std::uint64_t>(record_row(records.record(q))) << 32 |
                              static_cast<std::uint32_t>(record_col(records.record(q)));
    by_rank[key % static_cast<std::uint64_t>(ranks)].push_back(key);
  }
  std::vector<std::uint64_t> send;
  std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    send.insert(send.end(), by_rank[r].begin(), by_rank[r].end());
    send_bytes[r] = static_cast<std::int64_t>(by_rank[r].size() * sizeof(std::uint64_t));
  }
  std::vector<std::int64_t> recv_bytes;
  const LargeVector<std::byte> received = comm.exchange(reinterpret_cast<const std::byte*>(send.data()), send_bytes, recv_bytes);
  std::vector<std::uint64_t> keys(received.size() / sizeof(std::uint64_t));
  if (!keys.empty()) std::memcpy(keys.data(), received.data(), keys.size() * sizeof(std::uint64_t));
  std::sort(keys.begin(), keys.end());
  std::int64_t local = INT64_MAX;
  for (std::size_t e = 1; e < keys.size() && local == INT64_MAX; ++e)
    if (keys[e] == keys[e - 1]) local = static_cast<std::int64_t>(keys[e]);
  const std::int64_t global = -comm.max(-local);
  return global == INT64_MAX ? -1 : global;
}

void multiply_empty(io::InputFile& a_file, io::InputFile& b_file, const TeamFactory& make_team,
                    io::ProductWriter& writer, const comm::Communicator& comm, Observer& observer, Report& report) {
  const MatrixShape shape = a_file.header().shape();
  std::int64_t my_b_records = 0;
  {
    const PhaseScope build(report.mine, observer, Phase::build);
    comm.run_phase([&] {
      for (io::InputFile* file : {&a_file, &b_file}) {
        const InputRecords records = file->read_records(io::record_share(file->header().k, comm.rank(), comm.size()));
        if (file == &b_file) my_b_records = records.size();
        const std::int64_t twice = first_duplicate_block(records, comm);
        if (twice < 0) continue;
        const auto i = static_cast<std::int32_t>(twice >> 32), j = static_cast<std::int32_t>(twice & 0xFFFFFFFF);
        // Rank 0's message is the one agreed on: only it scans the file for the records' places.
        throw InputError(comm.is_root() ? partition::duplicate_message(*file)(i, j) : "duplicate block");
      }
      const Team team = make_team({});
      report.backend = team.at(0)->name();
      observer.backend_chosen(report.backend);
    });
  }
  // Each rank's panel is its share of the file's block-rows, and holds none of them: no labels
  // (compact indices, none in use), one row pointer. The HDF5 writer streams the panel's entries
  // of /indptr (the file holds n/m + 1 of them) in bounded pieces.
  const std::vector<std::int32_t> rows = partition::equal_row_ranges(shape.block_rows(), comm.size());
  static const std::vector<std::int32_t> no_labels;
  OutputLayout empty;
  empty.row_ptr.assign(1, 0);
  empty.labels = &no_labels;
  empty.file_row_begin = rows[comm.rank()];
  empty.file_row_end = rows[comm.rank() + 1];
  observer.phase_started(Phase::commit);
  comm.run_phase([&] { writer.begin(shape, 0, 0, empty); });
  report.device = "none (empty product)";
  report.rank_devices.assign(static_cast<std::size_t>(comm.size()), report.device);
  report.rank_work.assign(static_cast<std::size_t>(comm.size()), 0);
  report.rank_rows = comm.gather_all(static_cast<std::int64_t>(empty.file_row_end - empty.file_row_begin));
  report.rank_bytes_exchanged = comm.gather_all(std::int64_t{0});
  report.rank_b_records = comm.gather_all(my_b_records);
  report.rank_tiles_for_neighbours.assign(static_cast<std::size_t>(comm.size()), 0);
}

}  // namespace blockmm::multiply
