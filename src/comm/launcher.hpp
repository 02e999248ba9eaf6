// Where the launcher placed this process, read from the variables it sets before MPI starts:
// Open MPI's mpirun (OMPI_COMM_WORLD_*), PMI and PMIx (MPICH's Hydra, Intel MPI, prterun,
// srun --mpi=pmix), MVAPICH, and Slurm's job steps. The one reader for every decision taken
// before MPI_Init: whether MPI starts at all, which rank reports a usage error, what MPI starts
// with (mpi_start.hpp) and which GPU CUDA sees (driver/backend_choice.hpp). What the launcher
// does not say is -1; a value that is not a count counts as not said.
#pragma once

#include <functional>

namespace blockmm::comm {

// A variable's value, or nullptr where it is not set (an empty value counts as not set).
using EnvironmentLookup = std::function<const char*(const char*)>;

struct LauncherPlacement {
  // Started as a rank of a parallel job: an MPI launcher's variables, or a Slurm step of more
  // than one task.
  bool launched = false;
  int rank = -1;  // in the job: Open MPI, PMIx, PMI or Slurm, the first that says

  // Open MPI's mpirun: the job's size, and this node's ranks.
  int open_mpi_size = -1;
  int open_mpi_local_rank = -1;
  int open_mpi_local_size = -1;
  // Slurm's step (srun, also around mpirun inside an allocation).
  int slurm_local_id = -1;
  int slurm_step_tasks = -1;
  int slurm_step_nodes = -1;

  // Whether every rank of the job is known to be on this node: Open MPI's counts where mpirun
  // gives them, else a one-node Slurm step.
  bool on_one_node() const;
  // This rank among the ranks of its node, and whether it is the only one there; false where
  // the launcher does not say (MPICH's Hydra, say: known only after MPI_Init).
  bool knows_local_rank() const;
  int local_rank() const;
  bool alone_on_node() const;
  // The ranks on this node, or -1 where the launcher does not say.
  int local_size() const;
};

LauncherPlacement launcher_placement(const EnvironmentLookup& lookup);

// A count (0 .. 2^20) written in decimal and nothing else, or -1: how a launcher's (or the GPU
// driver's) numbers are read.
int parse_count(const char* text);

}  // namespace blockmm::comm
