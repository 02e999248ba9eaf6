// The cuda backend's start in a process and its factory, for host code (the .cu files stay in
// kernels/cuda). CUDA's start is most of a short run's time, so it is begun as early as the run
// knows it will probably use GPUs, and overlaps MPI's start and the reading of the inputs: the
// environment CUDA starts with (set before it loads), the driver's load, every GPU's context at
// once, the pinned staging each backend reads through, and cuBLAS where the dense path is likely.
// One CudaStart a process owns all of it and hands each GPU's share to the backend made for that
// GPU. In a build without CUDA everything here exists and finds no GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

// A variable's value, or nullptr where it is unset.
using EnvironmentLookup = std::function<const char*(const char*)>;

// --- Before CUDA loads ---

// The GPUs of this node that CUDA can use, from the driver's own files, without CUDA (which
// would load its driver and set up every GPU it sees): the UUID of each GPU under
// `proc_root`/gpus/*/information that is not excluded and whose `dev_root`/nvidia<minor> this
// process may open, in bus order. Empty when the files are missing or any GPU is split into MIG
// instances (CUDA would see those instead).
std::vector<std::string> node_gpu_uuids(const std::string& proc_root = "/proc/driver/nvidia",
                                        const std::string& dev_root = "/dev");

// Where this process sits among its node's ranks, as the launcher says before MPI starts.
struct NodePlace {
  bool known = true;    // false: known only after MPI_Init (MPICH's Hydra, say)
  int local_rank = 0;
  int local_ranks = 1;  // ranks on this node
};

// The GPUs of a node's list of `gpus` that the rank at `place` uses: a share of them each where
// there are at least as many GPUs as ranks (rank r of L takes [r G / L, (r + 1) G / L)), else
// GPU (r mod G), shared; at most `wanted` of its share (0: all of it).
std::vector<int> gpu_share(int gpus, const NodePlace& place, int wanted);

// The GPUs this process uses, made the only ones CUDA sees where the environment alone tells
// which (CUDA sets up every GPU it can see), as "CUDA_VISIBLE_DEVICES=<list>": the process's
// gpu_share() of CUDA_VISIBLE_DEVICES's entries where it names several, else of `node_gpus`
// (node_gpu_uuids()). "" where nothing is to be narrowed: the place is not known, the user named
// one GPU or none, or the share is every GPU there is.
std::string cuda_visibility_setting(const EnvironmentLookup& lookup, const NodePlace& place, int wanted,
                                    const std::vector<std::string>& node_gpus);

// "CUDA_DEVICE_MAX_CONNECTIONS=1" where the user has not set a count: one hardware work queue a
// context. CUDA's default of 8 costs every context's creation and teardown time, and blockmm
// issues its streams' work in the order it runs (the numeric phase issues chunk c's kernels
// before chunk c-1's copy, which waits only for chunk c-1's kernels), so one queue loses no
// overlap.
std::string cuda_connections_setting(const EnvironmentLookup& lookup);

// Whether a GPU can be here at all, without asking CUDA: `cuda_visible_devices` (the variable's
// value, or nullptr) does not hide every device and the driver's device nodes exist.
bool cuda_device_may_exist(const char* cuda_visible_devices);

// --- CUDA's start and the backends ---

struct CudaConfig {
  int device = 0;          // ordinal among the GPUs this process sees
  int sharers = 1;         // processes using that GPU (they split its free memory)
  int threads = 0;         // reader threads of the device build; 0: OpenMP's count
  std::int64_t memory_budget = 0;  // device bytes the backend may use; 0: a share of the free memory
  CudaChoices choices;
  WorkEstimate estimate;   // the device's share of the rank's work: cuBLAS loads early where dense
  std::string name_note;   // added to the device's name in reports (the visibility blockmm set)
};

class CudaStart {
 public:
  // Loads CUDA's driver on a thread of its own where `gpu_may_exist`, so that MPI's start hides
  // it; nothing otherwise (device_count() is then 0).
  explicit CudaStart(bool gpu_may_exist);
  // Waits for what is in flight; unpins what no backend took.
  ~CudaStart();
  CudaStart(const CudaStart&) = delete;
  CudaStart& operator=(const CudaStart&) = delete;

  // GPUs CUDA can use here (waits for the driver's load); 0 without a GPU or a CUDA build.
  int device_count();
  // The device's UUID as 32 hex digits ("" when it cannot be asked): ranks compare them to learn
  // which of them share a GPU, whatever ordinal each sees.
  std::string device_uuid(int device);
  // Starts the contexts of `devices`, each on a thread of its own, with beside each the pinned
  // staging that reading `input_bytes` on `threads` readers uses, and peer access between them
  // where the GPUs allow it. Never throws: a failure shows again when the backend is made.
  void start_devices(const std::vector<int>& devices, std::int64_t input_bytes, int threads);
  // Loads cuBLAS on a thread of its own where the dense path will likely run `estimate`.
  void preload_dense_library(const WorkEstimate& estimate, const CudaChoices& choices);
  // A backend on config.device, which takes what start_devices prepared there. Throws
  // ResourceError where the device cannot be used.
  std::unique_ptr<Backend> make_backend(const CudaConfig& config);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace blockmm::kernels
