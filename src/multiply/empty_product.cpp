#include "multiply/empty_product.hpp"

#include <vector>

#include "core/error.hpp"
#include "partition/distribute.hpp"
#include "partition/exchange.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {

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
        const std::int64_t twice = partition::first_duplicate_block(records, comm);
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
