// What blockmm sets in its own environment before MPI_Init, where the user set nothing: the
// defaults that keep a launch on one node from paying for machinery it never uses
// (docs/running.md, "GPU nodes").
//   - HWLOC_COMPONENTS=-opencl: hwloc's OpenCL plugin starts every OpenCL platform to list its
//     devices (a GPU driver's platform is slow to start), for a topology in which MPI never
//     needs them.
//   - Open MPI, every rank of the job on this node: OMPI_MCA_pml=ob1 and OMPI_MCA_osc=^ucx, so
//     that ranks talk through shared memory at once instead of first starting UCX, which adds to
//     every MPI_Init and finds only this node.
// A variable the user (or `mpirun --mca`) set is never changed; naming any Open MPI transport
// (pml, btl or mtl) keeps all three as they are.
#pragma once

#include <string>
#include <vector>

#include "comm/launcher.hpp"

namespace blockmm::comm {

// The settings for an environment seen through `lookup`, as "NAME=value", in the order given
// above. `open_mpi`: whether blockmm was built against Open MPI.
std::vector<std::string> mpi_start_settings(const EnvironmentLookup& lookup, bool open_mpi);

// Applies mpi_start_settings() to this process's environment (seen through `lookup`) when MPI
// will start, and returns what it set. setenv is not safe beside another thread's getenv: call
// it before any thread starts (main does, before the CUDA driver load).
std::vector<std::string> apply_mpi_start_settings(bool mpi_will_start, const EnvironmentLookup& lookup);

// What apply_mpi_start_settings() set in this process (empty before it or without MPI).
const std::vector<std::string>& applied_mpi_start_settings();

// Sets each "NAME=value" in this process's environment (setenv: only while no other thread runs).
void set_environment(const std::vector<std::string>& settings);

}  // namespace blockmm::comm
