#include "comm/mpi_start.hpp"

#include <mpi.h>

#include <cstdlib>

#include "comm/communicator.hpp"

namespace blockmm::comm {
namespace {

std::vector<std::string>& applied() {
  static std::vector<std::string> settings;
  return settings;
}

}  // namespace

std::vector<std::string> mpi_start_settings(const std::function<const char*(const char*)>& lookup, bool open_mpi) {
  const auto is_set = [&](const char* name) {
    const char* v = lookup(name);
    return v != nullptr && *v != '\0';
  };
  std::vector<std::string> settings;
  if (!is_set("HWLOC_COMPONENTS")) settings.emplace_back("HWLOC_COMPONENTS=-opencl");
  if (!open_mpi) return settings;
  // One node: Open MPI's launcher tells each rank the job's size and how many ranks share its
  // node; under srun (direct launch) the step's node count says it.
  const char* world = lookup("OMPI_COMM_WORLD_SIZE");
  const char* local = lookup("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* step_nodes = lookup("SLURM_STEP_NUM_NODES");
  const bool one_node = (world != nullptr && local != nullptr && *world != '\0' && std::atoi(world) > 0 &&
                         std::atoi(world) == std::atoi(local)) ||
                        (world == nullptr && step_nodes != nullptr && std::atoi(step_nodes) == 1);
  if (!one_node || is_set("OMPI_MCA_pml") || is_set("OMPI_MCA_btl") || is_set("OMPI_MCA_mtl")) return settings;
  settings.emplace_back("OMPI_MCA_pml=ob1");
  if (!is_set("OMPI_MCA_osc")) settings.emplace_back("OMPI_MCA_osc=^ucx");
  return settings;
}

std::vector<std::string> apply_mpi_start_settings(MpiMode mode) {
  if (!mpi_will_start(mode)) return {};
#if defined(OPEN_MPI)
  constexpr bool open_mpi = true;
#else
  constexpr bool open_mpi = false;
#endif
  std::vector<std::string> settings =
      mpi_start_settings([](const char* name) -> const char* { return std::getenv(name); }, open_mpi);
  set_environment(settings);
  applied() = settings;
  return settings;
}

const std::vector<std::string>& applied_mpi_start_settings() { return applied(); }

void set_environment(const std::vector<std::string>& settings) {
  for (const std::string& s : settings) {
    const std::size_t eq = s.find('=');
    ::setenv(s.substr(0, eq).c_str(), s.substr(eq + 1).c_str(), 1);
  }
}

}  // namespace blockmm::comm
