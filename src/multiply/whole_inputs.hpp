// Whole inputs on every rank of one node. Where a backend builds all of A and all of B faster
// than the host could place their records (the cuda backend: a parallel read into pinned slots,
// uploaded as it goes, sorted on the device), the ranks of one node each build both from the
// files (they share the page cache), balance the output block-rows by the exact block products
// of each row, and keep their own rows of A: no record crosses between ranks and nothing is
// sorted on the host, where the host distribution (partition::distribute) would cost several
// times the device build.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "kernels/backend.hpp"

namespace blockmm::multiply {

struct WholeInputs {
  std::vector<std::int32_t> bounds;     // ranks + 1: rank r owns block-rows [bounds[r], bounds[r+1])
  std::unique_ptr<kernels::Operand> a;  // this rank's block-rows of A
  std::unique_ptr<kernels::Operand> b;  // all of B
  double read_upload_seconds = 0;       // of the builds, reading and uploading the records
};

// Collective. Whether the ranks build whole inputs: several of them, all on one node, each able
// to read both files, and every rank's backend saying yes for these inputs.
bool builds_whole_inputs(const kernels::Backend& backend, io::InputFile& a_file, io::InputFile& b_file,
                         const comm::Communicator& comm);

// Collective. Builds B and then A whole (a duplicate block is reported as on one rank, by every
// rank), balances the rows by kernels::Backend::row_products and keeps this rank's. The bounds
// follow from the files alone; they are checked against rank 0's.
WholeInputs build_whole_inputs(kernels::Backend& backend, io::InputFile& a_file, io::InputFile& b_file,
                               const comm::Communicator& comm);

}  // namespace blockmm::multiply
