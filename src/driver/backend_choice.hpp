// Which backend runs this rank, and on which GPU. "auto" takes the GPU only when one is
// visible and the rank's work repays CUDA start-up (bench/NOTES.md has the measurement).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/launcher.hpp"
#include "driver/options.hpp"
#include "kernels/backend.hpp"

namespace blockmm::driver {

// "auto" takes the GPU from this many useful multiply-adds, or from this many input blocks
// (small m: the CPU's build and symbolic phases cost per block). Measured on the H200 machine,
// 16 cores (bench/NOTES.md): E2 (m = 2, 5.2 M blocks) cuda 0.46 s vs cpu 0.55 s, E1 (m = 1,
// 21 M blocks) 0.57 vs 1.32 s; below about 4 M blocks CUDA's 0.3-0.4 s of start-up and teardown
// does not pay.
constexpr std::int64_t kAutoCudaMinMacs = std::int64_t{4} << 30;
constexpr std::int64_t kAutoCudaMinInputBlocks = std::int64_t{4} << 20;

// Input bytes above which "auto" starts the CUDA context while the inputs are read.
constexpr std::int64_t kAutoCudaWarmUpInputBytes = std::int64_t{64} << 20;

// Before MPI_Init (the options are known, the ranks not yet): loads the CUDA driver (0.1-0.19 s
// on the H100 machine) on a thread of its own where the run will probably want a GPU
// (--backend cuda, or auto with inputs of at least kAutoCudaWarmUpInputBytes on disk), so that
// MPI's start-up hides it. Only the driver: which device is this rank's follows its node-local
// rank, known after MPI_Init (start_cuda_warm_up creates that context). Empty future otherwise.
std::shared_future<void> start_cuda_driver_load(const Options& options);

// The one GPU this process will use, made the only one CUDA sees, where the environment alone
// tells which (CUDA's start-up sets up every visible GPU: 0.11 s each on the two-H200 node,
// so a process using one GPU of eight would pay for eight). Known when this process is the only
// rank on its node (a plain run; Open MPI's local size 1; a Slurm step of one task a node): the
// first visible GPU, as the backend would take; and for several ranks a node: entry
// (node-local rank mod entries) of the CUDA_VISIBLE_DEVICES list, or without one of
// `node_gpus` (node_gpu_uuids()). Otherwise, and when CUDA_VISIBLE_DEVICES is set but empty or
// names one GPU already, nothing. Returns "CUDA_VISIBLE_DEVICES=<value>" or "". `lookup` reads
// the environment (nullptr: not set); `uses_mpi`: whether MPI will start.
std::string cuda_visibility_setting(const comm::EnvironmentLookup& lookup, bool uses_mpi,
                                    const std::vector<std::string>& node_gpus = {});

// The GPUs of this node that CUDA can use, from the driver's own files, without CUDA (reading
// them takes microseconds; cuInit with four GPUs visible took 0.55 s alone and 0.7-1.5 s beside
// three other ranks): the UUID of each GPU under `proc_root`/gpus/*/information that is not
// excluded and whose `dev_root`/nvidia<minor> this process may open, in bus order. Empty when
// the files are missing or any GPU is split into MIG instances (CUDA would see those instead).
std::vector<std::string> node_gpu_uuids(const std::string& proc_root = "/proc/driver/nvidia",
                                        const std::string& dev_root = "/dev");

// How many hardware work queues (channels) CUDA gives this process's context: one, where the
// user has not set CUDA_DEVICE_MAX_CONNECTIONS (an empty value counts as not set). CUDA's
// default of 8 cost 0.06 s of every context's creation on one H200 and some of its teardown:
// G1 and E1 0.43-0.46 s of wall against 0.32-0.38 s with one (bench/NOTES.md item 20). One
// queue runs blockmm's streams in the order their work was issued, and that order is already
// the one they need: the numeric phase issues chunk c's kernels before the copy of chunk c-1,
// which waits for chunk c-1's kernels only, so copy and compute still overlap; the readers'
// streams only copy host to device, at the link's rate either way (numeric and build phases
// measured level with 8). Returns "CUDA_DEVICE_MAX_CONNECTIONS=1" or "".
std::string cuda_connections_setting(const comm::EnvironmentLookup& lookup);

// Sets cuda_visibility_setting() and cuda_connections_setting() in this process's environment
// where the run will probably use the GPU (as start_cuda_driver_load decides). Before any other
// thread starts (setenv) and before CUDA loads. Returns what it set, also kept for
// applied_cuda_start_settings(); applied_cuda_visibility() is the visibility setting alone ("" if
// none).
std::vector<std::string> apply_cuda_start_settings(const Options& options, bool uses_mpi);
const std::vector<std::string>& applied_cuda_start_settings();
std::string applied_cuda_visibility();

// Starts CUDA in the background when this run will probably use it (the context, and pinned
// staging for `input_bytes` of records read on `threads`: kernels::warm_up_cuda); the returned
// future is waited for by choose_backend (empty when nothing was started).
std::shared_future<void> start_cuda_warm_up(const Options& options, const comm::Communicator& comm,
                                            std::int64_t input_bytes, int threads);

// Loads the dense GPU path's library (kernels::preload_dense_library) on a thread of its own
// where the run will probably use the GPU, a GPU may exist here (kernels::cuda_device_may_exist)
// and, by `estimate` (estimated_rank_work), the dense path will run: beside the CUDA context's
// creation rather than beside the build, which on G1 left the numeric phase waiting 0.014-0.026
// s for it (bench/NOTES.md item 20). Empty future otherwise; a load in flight is waited for by
// the future's destructor.
std::future<void> start_dense_library_load(const Options& options, std::int64_t input_bytes,
                                           const kernels::BackendConfig::WorkEstimate& estimate);

// `estimate`: the rank's expected work, from the headers before any operand exists (backends
// build their own operands, so the choice comes first). auto takes the GPU for enough
// multiply-adds; the cuda backend uses it to prepare its dense path early.
// `gpu_sharers`: from count_gpu_sharers (0: count by node-local rank and visible devices).
std::unique_ptr<kernels::Backend> choose_backend(const Options& options, const comm::Communicator& comm, int threads,
                                                 const kernels::BackendConfig::WorkEstimate& estimate,
                                                 int gpu_sharers = 0);

// Collective (every rank calls it, whatever it will choose): the ranks of this node that use the
// same GPU as this rank, told apart by the device's UUID, so that a rank given a GPU of its own
// (Slurm's --gpus-per-task=1: every rank sees "device 0") uses all of it. 0 when some rank
// cannot name its device (no GPU, no CUDA build): the caller then counts as before.
int count_gpu_sharers(const comm::Communicator& comm);

// The counting itself: keys[r] names rank r's (node, GPU), 0 for unknown; how many ranks share
// rank `rank`'s key, or 0 when any key is unknown.
int count_equal_keys(const std::vector<std::int64_t>& keys, int rank);

// One rank's panel from the headers alone: its share of the block-rows, and k_A k_B / p block
// products as if blocks were spread evenly, shared among the ranks.
kernels::BackendConfig::WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks,
                                                         int ranks);

// Useful multiply-adds of an estimate (block products x m^3), saturated at INT64_MAX.
std::int64_t estimated_macs(const kernels::BackendConfig::WorkEstimate& estimate);

}  // namespace blockmm::driver
