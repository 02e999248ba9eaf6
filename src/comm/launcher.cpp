#include "comm/launcher.hpp"

#include <cstdlib>

namespace blockmm::comm {

int parse_count(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return *end == '\0' && value >= 0 && value <= 1 << 20 ? static_cast<int>(value) : -1;
}

LauncherPlacement launcher_placement(const EnvironmentLookup& lookup) {
  const auto value = [&](const char* name) -> const char* {
    const char* v = lookup(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  LauncherPlacement p;
  p.open_mpi_size = parse_count(value("OMPI_COMM_WORLD_SIZE"));
  p.open_mpi_local_rank = parse_count(value("OMPI_COMM_WORLD_LOCAL_RANK"));
  p.open_mpi_local_size = parse_count(value("OMPI_COMM_WORLD_LOCAL_SIZE"));
  p.slurm_local_id = parse_count(value("SLURM_LOCALID"));
  p.slurm_step_tasks = parse_count(value("SLURM_STEP_NUM_TASKS"));
  p.slurm_step_nodes = parse_count(value("SLURM_STEP_NUM_NODES"));
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (value(name) != nullptr) {
      p.rank = parse_count(value(name));
      break;
    }
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (value(name) != nullptr) p.launched = true;
  if (p.slurm_step_tasks > 1) p.launched = true;
  return p;
}

bool LauncherPlacement::on_one_node() const {
  if (open_mpi_size >= 0) return open_mpi_size > 0 && open_mpi_size == open_mpi_local_size;
  return slurm_step_nodes == 1;
}

bool LauncherPlacement::knows_local_rank() const { return local_rank() >= 0; }

int LauncherPlacement::local_rank() const { return open_mpi_local_rank >= 0 ? open_mpi_local_rank : slurm_local_id; }

int LauncherPlacement::local_size() const {
  if (open_mpi_local_rank >= 0) return open_mpi_local_size;
  if (alone_on_node()) return 1;
  return slurm_local_id >= 0 && slurm_step_nodes == 1 ? slurm_step_tasks : -1;
}

bool LauncherPlacement::alone_on_node() const {
  if (open_mpi_local_rank >= 0) return open_mpi_local_size == 1;
  return slurm_local_id >= 0 && slurm_step_tasks > 0 && slurm_step_tasks == slurm_step_nodes;
}

}  // namespace blockmm::comm
