// How many threads a rank runs, and on which cores. The default is the rank's share of its
// node's cores. Open MPI binds each of one or two ranks to a single core unless told otherwise,
// which starved a multi-threaded rank (5-22x slower): in that one case, a binding nobody asked
// for, blockmm widens the rank to its share of the node and says so. Any binding the user chose
// (mpirun --bind-to, srun --cpu-bind, taskset) is kept, and the threads follow its cores.
#pragma once

#include <string>

#include "settings/settings.hpp"

namespace blockmm::driver {

struct CoreFacts {
  int requested_threads = 0;        // --threads (0: not given)
  int omp_num_threads = 0;          // OMP_NUM_THREADS as the runtime read it (0: not set)
  int node_cores = 1;               // online cores of the node
  int node_rank = 0;                // this rank among the node's ranks
  int node_size = 1;                // ranks on the node
  int bound_cores = 0;              // CPUs the launcher bound this rank to (0: unknown; cores.cpp)
  bool launcher_default_binding = false;  // bound by Open MPI's default policy, not by the user
};

struct CorePlan {
  int threads = 1;
  // Widen the affinity to cores [widen_first, widen_first + widen_count) of the node (count 0: keep it).
  int widen_first = 0;
  int widen_count = 0;
  std::string note;  // one line for the user ("" when there is nothing to say)
};

CorePlan plan_cores(const CoreFacts& facts);

// The facts of this process (affinity mask, environment), then the plan carried out: the
// affinity widened where the plan says so (a refusal by the system keeps the binding, and the
// note then names the fix instead).
CorePlan choose_cores(int requested_threads, int node_rank, int node_size, const settings::Lookup& environment);

}  // namespace blockmm::driver
