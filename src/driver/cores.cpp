#include "driver/cores.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace blockmm::driver {
namespace {

// The CPUs this rank may run on, as the launcher bound it. With OMP_PLACES or OMP_PROC_BIND set,
// libgomp pins the initial thread to the first place when it loads, before main: the affinity
// mask read now would say one core (cpu.sbatch's "2 threads share the 1 core(s)", issue 53). The
// places were cut from the mask as it was before that pinning, so their CPUs are the binding.
int bound_cpus() {
  const int places = omp_get_num_places();
  if (places > 0) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    std::vector<int> ids;
    for (int p = 0; p < places; ++p) {
      ids.assign(static_cast<std::size_t>(std::max(0, omp_get_place_num_procs(p))), 0);
      if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
      for (const int id : ids)
        if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &cpus);
    }
    if (CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  return ::sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 0;
}

}  // namespace

CorePlan plan_cores(const CoreFacts& facts) {
  CorePlan plan;
  const int share = std::max(1, facts.node_cores / std::max(1, facts.node_size));
  if (facts.requested_threads > 0 || facts.omp_num_threads > 0) {
    plan.threads = facts.requested_threads > 0 ? facts.requested_threads : facts.omp_num_threads;
    if (facts.bound_cores > 0 && plan.threads > facts.bound_cores)
      plan.note = std::to_string(plan.threads) + " threads share the " + std::to_string(facts.bound_cores) +
                  " core(s) this rank is bound to";
    return plan;
  }
  if (facts.bound_cores <= 0 || facts.bound_cores >= share) {
    plan.threads = share;
    return plan;
  }
  if (facts.launcher_default_binding) {
    plan.threads = share;
    plan.widen_first = std::min(facts.node_rank * share, std::max(0, facts.node_cores - share));
    plan.widen_count = share;
    plan.note = "mpirun bound each rank to " + std::to_string(facts.bound_cores) +
                " core(s) (its default for up to 2 ranks); blockmm uses each rank's share of the node instead, " +
                std::to_string(share) + " cores (mpirun --bind-to none, or --bind-to core to keep the binding)";
    return plan;
  }
  plan.threads = facts.bound_cores;  // the user's binding: one thread a bound core
  return plan;
}

CorePlan choose_cores(int requested_threads, int node_rank, int node_size, const settings::Lookup& environment) {
  CoreFacts facts;
  facts.requested_threads = requested_threads;
  if (const char* omp = environment("OMP_NUM_THREADS"); omp != nullptr && *omp != '\0')
    facts.omp_num_threads = omp_get_max_threads();
  facts.node_cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  facts.node_rank = node_rank;
  facts.node_size = node_size;
  facts.bound_cores = bound_cpus();
  // Open MPI's mpirun says that it bound the rank (orte_bound_at_launch), and passes an explicit
  // --bind-to (or the MCA parameter) on as the binding policy; its default binding leaves no
  // policy behind. srun and other launchers set neither: their binding is always kept.
  const auto env = [&environment](const char* name) {
    const char* v = environment(name);
    return std::string(v == nullptr ? "" : v);
  };
  facts.launcher_default_binding = env("OMPI_MCA_orte_launch") == "1" && env("OMPI_MCA_orte_bound_at_launch") == "1" &&
                                   env("OMPI_MCA_hwloc_base_binding_policy").empty();
  CorePlan plan = plan_cores(facts);
  if (plan.widen_count > 0) {
    cpu_set_t wide;
    CPU_ZERO(&wide);
    for (int c = plan.widen_first; c < plan.widen_first + plan.widen_count && c < CPU_SETSIZE; ++c) CPU_SET(c, &wide);
    if (::sched_setaffinity(0, sizeof wide, &wide) != 0) {
      plan.threads = facts.bound_cores;
      plan.note = "mpirun bound each rank to " + std::to_string(facts.bound_cores) +
                  " core(s); launch with mpirun --bind-to none (or --map-by slot:PE=N) to give each rank its share of the node";
    }
  }
  return plan;
}

}  // namespace blockmm::driver
