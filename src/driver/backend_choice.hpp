// Which backends run a rank, as the command line and the ranks' placement ask: when to begin
// CUDA's start and with what, which GPUs a rank drives, and the team made of them (the kind and
// the team themselves are src/backends', shared with the Python extension). CUDA's start itself
// belongs to the cuda backend (kernels/cuda_start.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/choice.hpp"
#include "comm/communicator.hpp"
#include "driver/options.hpp"
#include "kernels/cuda_start.hpp"
#include "multiply/multiply.hpp"

namespace blockmm::driver {

using backends::cuda_choices;
using backends::kOneGpuBelowMacs;
// Input bytes above which "auto" starts CUDA while the inputs are read.
constexpr std::int64_t kAutoCudaWarmUpInputBytes = std::int64_t{64} << 20;

// The input files' bytes on disk (0 for what is not a regular file).
std::int64_t input_file_bytes(const Options& options);

// Whether this run will probably use the GPU: --backend cuda, or auto with inputs this large.
bool cuda_likely(const Options& options, std::int64_t input_bytes);

// A process on its own without --gpus: backends::automatic_gpu_count of the COL380 headers (HDF5
// inputs, or headers that do not describe a product, give no estimate: 0, every GPU). --gpus
// given: its count.
int automatic_gpu_count(const Options& options);

// Before MPI and CUDA start (setenv: no other thread may run), where the run will probably use a
// GPU (cuda_likely): what CUDA starts with (kernels::cuda_visibility_setting,
// kernels::cuda_connections_setting).
// Returns the "NAME=value" settings it made.
std::vector<std::string> apply_cuda_start_settings(const Options& options, const comm::LauncherPlacement& placement,
                                                   bool uses_mpi, const settings::Lookup& environment);

// The GPUs (ordinals as this process sees them) that this rank drives: all it sees where blockmm
// narrowed what it sees to its share (`narrowed`), else its share of the node's
// (kernels::gpu_share); at most options.gpus.
std::vector<int> rank_gpus(int visible, const comm::Communicator& comm, bool narrowed, int wanted);

// The team's factory for multiply(): the kind by the options and the estimate, and for cuda one
// backend on each of `gpus`. `gpu_sharers`: ranks sharing the first of them (0: counted by
// node-local rank). A team made for the same kind and configuration before (a batch's earlier
// product) is taken from `kept` instead of made again; a new one is kept there.
multiply::TeamFactory team_factory(const Options& options, kernels::CudaStart& cuda, const comm::Communicator& comm,
                                   int threads, const std::vector<int>& gpus, int gpu_sharers, std::string name_note,
                                   backends::KeptTeams& kept);

// Collective (every rank calls it, whatever it will choose): the ranks of this node that use the
// same GPU as this rank's `device`, told apart by the device's UUID, so that a rank given a GPU of
// its own (Slurm's --gpus-per-task=1: every rank sees "device 0") uses all of it. 0 when some
// rank cannot name its device: the caller then counts as before.
int count_gpu_sharers(kernels::CudaStart& cuda, int device, const comm::Communicator& comm);

// The counting itself: keys[r] names rank r's (node, GPU), 0 for unknown; how many ranks share
// rank `rank`'s key, or 0 when any key is unknown.
int count_equal_keys(const std::vector<std::int64_t>& keys, int rank);

}  // namespace blockmm::driver
