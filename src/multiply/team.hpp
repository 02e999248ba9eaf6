// A rank that drives several backends of one kind (a team: one a GPU) splits its work over them.
// Across ranks the output's block-rows are split as always (partition::distribute); within a
// rank, one of two layouts:
//   - rows: where B fits each backend beside A. The first backend builds B and the second the
//     rank's A from the records at once (each read once, over two host links); the second copies
//     B, balances the rank's block-rows by their block products, and every backend copies B and
//     its rows of A from those two (between GPUs a peer copy, over NVLink where there is one),
//     not from the host once a GPU.
//   - columns: where B does not fit one backend. B's records are read once into host memory and
//     cut into block-column panels of equal work; every backend holds all of the rank's A (copied
//     from the first) and builds the panels it is given, at once where they fit together, else
//     one at a time (streamed: each built for the symbolic phase, freed, and built again for the
//     numeric phase). Output row r's tiles are the panels' tiles of row r in column order, so
//     each panel's tiles go to their places in the rank's rows. Where A itself does not fit
//     beside the numeric phase's chunks, it stays in host memory (OperandSpec::in_host_memory),
//     one copy that every GPU reads over its host link, and the panels take the device memory.
// Each backend runs its symbolic and numeric phases on a thread of its own; their writes reach
// the writer one at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "multiply/multiply.hpp"

namespace blockmm::multiply {

// The team's layout for a rank's operands: rows when B and A fit the first backend together
// (and no panels are asked for), else columns in `panels` panels, where each backend holds A,
// at most `resident_panels` panels at once and its smallest numeric chunks (asked-for panels:
// one at a time); A in host memory where it does not fit beside those chunks. Throws
// ResourceError naming what would make the product fit when the chunks alone do not fit.
struct TeamPlan {
  bool split_columns = false;
  int panels = 1;
  int resident_panels = 1;  // a backend's panels held at once; fewer than its panels: streamed
  bool a_in_host_memory = false;  // columns split: A read by the GPUs from host memory
};
TeamPlan plan_team(int backends, std::int64_t a_bytes, std::int64_t b_bytes, std::int64_t room,
                   std::int64_t numeric_bytes, int panels_asked);

// Collective. `labels`: the relabelled product's labels, or null.
void multiply_with_team(Team& team, io::InputFile* a_file, io::InputFile* b_file,
                        const std::shared_ptr<const std::vector<std::int32_t>>& labels, io::ProductWriter& writer,
                        const comm::Communicator& comm, const Options& options, Observer& observer, Report& report);

}  // namespace blockmm::multiply
