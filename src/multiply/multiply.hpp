// multiply: the distributed product C = A x B, the one entry behind which the ranks' placement
// (partition/), the backends' kernels (kernels/) and the writer meet. Each rank runs one pipeline
// (pipeline.hpp) over its team of W >= 1 backends as its plan (plan.hpp) lays the work out: whole
// inputs (whole_inputs.hpp) or partition::distribute(), rows shared (shared_rows.hpp), one B a
// node (shared_right_operand.hpp), rows split over the team or B in block-column panels. The
// caller (the driver; the Python extension) opens the inputs, makes the writer, provides the
// backends once the work is known, commits and reports; phases and progress reach it through an
// Observer. The entry's types are in options.hpp, report.hpp and phases.hpp.
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "multiply/options.hpp"
#include "multiply/phases.hpp"
#include "multiply/report.hpp"

namespace blockmm::multiply {

// Collective. Multiplies the inputs into `writer` (begun here, committed by the caller). Throws
// the agreed error of any rank.
Report multiply(io::InputFile& a_file, io::InputFile& b_file, const TeamFactory& make_team, io::ProductWriter& writer,
                const comm::Communicator& comm, const Options& options, Observer& observer);

}  // namespace blockmm::multiply
