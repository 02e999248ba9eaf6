// One rank's pipeline, whatever its team (a single backend is a team of one):
//   place   the rank's records: whole inputs, or partition::distribute (rows shared, B a node)
//   plan    its layout over the W backends (plan.hpp): rows, or B's block-column panels
//   build   B on the first backend and A on the second at once (rows), or A on the first and
//           each panel where it is computed, from memory or from B's file (columns)
//   symbolic, on each backend's thread: a pattern a job (streamed panels freed again)
//   layout  the rank's output rows assembled from the jobs' in column order; writer.begin
//   numeric, on each backend's thread, each job's tiles placed in the rank's rows
//   report  the rank's counts and times, a typed report for each backend
// A job is one backend's rows of A by B or by one panel of B. Backends run on threads of their
// own where there are several (on the calling thread where there is one), and their writes reach
// the writer one at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "multiply/options.hpp"
#include "multiply/phases.hpp"
#include "multiply/plan.hpp"
#include "multiply/report.hpp"

namespace blockmm::multiply {

// Collective. `labels`: the relabelled product's labels, or null.
void run_rank(const Team& team, io::InputFile& a_file, io::InputFile& b_file,
              const std::shared_ptr<const std::vector<std::int32_t>>& labels, const PlacementPlan& plan,
              io::ProductWriter& writer, const comm::Communicator& comm, const Options& options, Observer& observer,
              Report& report);

}  // namespace blockmm::multiply
