// multiply: the distributed product C = A x B, the one entry behind which the ranks' placement
// (partition/), the backends' kernels (kernels/) and the writer meet. It owns the distribution
// methods and the protocols around them:
//   - one rank: the backend reads the files where it builds (one_rank);
//   - ranks of one node whose backend builds whole inputs cheaply each build both and keep their
//     rows (whole_inputs.hpp);
//   - otherwise partition::distribute() hands each rank its rows; ranks of a node share the rows
//     at the ends of their panels (shared_rows.hpp) and read one copy of B
//     (shared_right_operand.hpp) where their backend computes on host operands;
//   - a rank that drives several backends (one a GPU) splits its work over them (team.hpp): by
//     rows where B fits each, else by B's block-columns, streamed in panels past their memory.
// The caller (the driver) opens the inputs, makes the writer, provides the backends once the
// work is known, commits the output and reports; phases and progress reach it through an
// Observer (phases.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "multiply/phases.hpp"
#include "multiply/report.hpp"
#include "partition/relabel.hpp"

namespace blockmm::multiply {

enum class RowSharingMode { automatic, off, on, give_first };

// What the distribution may do, fixed for the run (the driver fills it from its options and
// settings).
struct Options {
  std::int64_t chunk_bytes = std::int64_t{256} << 20;  // output bytes a numeric chunk holds at most
  int threads = 1;                                     // OpenMP threads of this rank
  partition::RelabelMode relabel = partition::RelabelMode::automatic;
  RowSharingMode share_rows = RowSharingMode::automatic;
  bool share_b = true;  // the ranks of a node may read one copy of B
  // B in this many block-column panels over a team however much memory there is (0: as the
  // backends' memory requires): tests run the split and streamed paths without a GPU.
  int b_panels = 0;
  // Where the process ends at once after the run: what it holds (the backends, their operands on
  // the device, patterns) is moved here instead of freed, since the kernel releases it anyway.
  std::vector<std::shared_ptr<void>>* kept_until_exit = nullptr;
};

// A rank's backends, made once the work is estimated (before any operand exists: backends build
// their own). One for host backends; one a GPU for cuda. Shared: a caller that runs several
// products may hand the same backends to each (their GPUs' contexts, staging and cuBLAS kept).
using Team = std::vector<std::shared_ptr<kernels::Backend>>;
using TeamFactory = std::function<Team(const kernels::WorkEstimate& estimate)>;

// Collective. Multiplies the inputs into `writer` (begun here, committed by the caller). Throws
// the agreed error of any rank.
Report multiply(io::InputFile& a_file, io::InputFile& b_file, const TeamFactory& make_team, io::ProductWriter& writer,
                const comm::Communicator& comm, const Options& options, Observer& observer);

// One rank's panel from the headers alone: its share of the block-rows, and k_A k_B / p block
// products as if blocks were spread evenly, shared among the ranks.
kernels::WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks, int ranks);

// Useful multiply-adds of an estimate (block products x m^3), saturated at INT64_MAX.
std::int64_t estimated_macs(const kernels::WorkEstimate& estimate);

}  // namespace blockmm::multiply
