// The multiply entry's types (multiply.hpp declares the entry, and no file of this module
// includes it): what the distribution may do, and the team of backends a rank drives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "partition/relabel.hpp"

namespace blockmm::multiply {

enum class RowSharingMode { automatic, off, on, give_first };

// What the distribution may do, fixed for the run (the driver fills it from its options and
// settings; an in-process caller may leave the defaults).
struct Options {
  std::int64_t chunk_bytes = std::int64_t{256} << 20;  // output bytes a numeric chunk holds at most
  int threads = 1;                                     // OpenMP threads of this rank
  partition::RelabelMode relabel = partition::RelabelMode::automatic;
  RowSharingMode share_rows = RowSharingMode::automatic;
  bool share_b = true;  // the ranks of a node may read one copy of B
  // B in this many block-column panels however much memory there is (0: as memory requires):
  // tests run the split and streamed paths without a GPU.
  int b_panels = 0;
  // Host memory this rank may hold (0: no bound). Where its rows of A, two output chunks and B
  // would not fit, B is cut into block-column panels, read from its file panel by panel. Asked
  // for (not a default): where A and a chunk alone exceed it, the product is refused.
  std::int64_t host_memory = 0;
  bool host_memory_asked = false;
  // Where the process ends at once after the run: what it holds (the backends, their operands on
  // the device, patterns) is moved here instead of freed, since the kernel releases it anyway.
  std::vector<std::shared_ptr<void>>* kept_until_exit = nullptr;
};

// A rank's backends, made once the work is estimated (before any operand exists: backends build
// their own). One for host backends; one a GPU for cuda. Shared: a caller that runs several
// products may hand the same backends to each (their GPUs' contexts, staging and cuBLAS kept).
using Team = std::vector<std::shared_ptr<kernels::Backend>>;
using TeamFactory = std::function<Team(const kernels::WorkEstimate& estimate)>;

}  // namespace blockmm::multiply
