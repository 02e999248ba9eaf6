// The product of an operand without records: nothing is built or multiplied, so that memory
// follows the records, not n (a 12-byte file may claim n = 2^31 - 1). The other operand's
// records are still read and checked: indices as they are read, duplicates here.
#pragma once

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "multiply/options.hpp"
#include "multiply/phases.hpp"
#include "multiply/report.hpp"

namespace blockmm::multiply {

// Collective. Fills the report's counts and per-rank lists; `make_team` is asked with an empty
// estimate, for the backend's name.
void multiply_empty(io::InputFile& a_file, io::InputFile& b_file, const TeamFactory& make_team,
                    io::ProductWriter& writer, const comm::Communicator& comm, Observer& observer, Report& report);

}  // namespace blockmm::multiply
