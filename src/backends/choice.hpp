// backends: which backends a process multiplies with, for every front end (the blockmm driver,
// the Python extension): the kind ("auto" takes the GPU only where one is visible and the work
// repays CUDA's start), how many GPUs a product is worth, the cuda backend's pinned choices, the
// team itself (one backend a GPU; host backends: one), and the product's options that the
// settings fix. When to begin CUDA's start, and how
// many GPUs a rank may see, stay with each front end (driver/backend_choice.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda_start.hpp"
#include "multiply/multiply.hpp"
#include "settings/settings.hpp"

namespace blockmm::backends {

// "auto" takes the GPU from this many useful multiply-adds, or from this many input blocks
// (small m: the CPU's build and symbolic phases cost per block); below both, CUDA's start and
// teardown cost more than it saves.
constexpr std::int64_t kAutoCudaMinMacs = std::int64_t{4} << 30;
constexpr std::int64_t kAutoCudaMinInputBlocks = std::int64_t{4} << 20;

// Whether a rank's estimated work repays CUDA's start (what "auto" decides on).
bool cuda_repays(const kernels::WorkEstimate& estimate);

// A process on its own drives every GPU it sees, unless the product is too small for more than
// one to pay: another GPU's start and exit cost more than it saves on a small product's numeric
// phase (the bound is docs/running.md's). The work is estimated from the block counts alone
// (evenly spread blocks: kA kB / (n/m) block products of m^3 multiply-adds). Returns 1 for such
// a small product, else 0 (every GPU).
constexpr double kOneGpuBelowMacs = 1.0e13;
int automatic_gpu_count(std::int32_t n, std::int32_t m, std::int64_t a_blocks, std::int64_t b_blocks);

// The cuda backend's choices that the developer settings pin (settings::CudaOverrides).
kernels::CudaChoices cuda_choices(const settings::CudaOverrides& overrides);

// Begins CUDA's start on `gpus` (each a context and the staging for reading `input_bytes` on
// `threads` readers), and cuBLAS's load where their share of `estimate` will likely take the dense
// path; what is begun here is waited for where the backends are made.
void start_gpus(kernels::CudaStart& cuda, const std::vector<int>& gpus, std::int64_t input_bytes, int threads,
                const kernels::WorkEstimate& estimate, const kernels::CudaChoices& choices);

// The product's options: its chunks and threads, and what the settings fix (relabelling, rows
// and B shared between ranks, B's panels).
multiply::Options product_options(const settings::Settings& settings, std::int64_t chunk_bytes, int threads);

// What a team is made of, from the front end's options and settings.
struct TeamRequest {
  std::optional<kernels::BackendKind> backend;  // none: auto
  int threads = 1;                               // OpenMP threads of the rank
  std::int64_t memory_budget = 0;                // device bytes a GPU; 0: automatic
  int workers = 0;                               // BLOCKMM_WORKERS: backends of the team (0: one a GPU; host: one)
  bool reference_whole_inputs = false;           // BLOCKMM_WHOLE_INPUTS
  kernels::CudaChoices cuda;
  bool verbose = false;                          // a failure's message names its internal cause
  std::vector<int> gpus;                         // the GPUs the rank drives (ordinals it sees)
  // Ranks sharing the first GPU (0: counted from node_ranks, the ranks of the node).
  int gpu_sharers = 0;
  int node_ranks = 1;
  std::string name_note;  // added to the devices' names in reports
};

// What a team was made for: a later product with the same takes it again (kind, threads,
// workers, budget, GPUs and how many ranks share them, the cuda choices, the reference's whole
// inputs).
struct TeamKey {
  kernels::BackendKind kind = kernels::BackendKind::cpu;
  int threads = 0;
  int workers = 0;
  std::int64_t memory_budget = 0;
  int gpu_sharers = 0;
  int node_ranks = 1;
  std::vector<int> gpus;
  kernels::CudaChoices::Dense dense = kernels::CudaChoices::Dense::automatic;
  kernels::CudaChoices::DenseType dense_type = kernels::CudaChoices::DenseType::automatic;
  bool generic_kernel = false;
  bool tensor_core_blocks = true;
  kernels::CudaChoices::Build build = kernels::CudaChoices::Build::automatic;
  bool probe_memory = false;
  std::int64_t symbolic_batch_bytes = 0;
  bool reference_whole_inputs = false;
  TeamKey(kernels::BackendKind team_kind, const TeamRequest& request);
  bool operator<(const TeamKey& other) const;
};
// The teams a process keeps from one product to the next (a batch's; the Python process's GPUs').
using KeptTeams = std::map<TeamKey, multiply::Team>;

// The team for a rank whose work is `estimate`. A team made for the same request before (a
// batch's earlier product) is taken from `kept` instead of made again; a new one is kept there.
// Throws ResourceError where cuda is asked for and no GPU can be used (the message says what to
// do, in the command line's words: --backend cpu).
multiply::Team make_team(const TeamRequest& request, kernels::CudaStart& cuda, const kernels::WorkEstimate& estimate,
                         KeptTeams& kept);

// After a product that failed with `error` (not a cancellation: its caller keeps the teams then),
// drops the kept teams unless the failure leaves their backends as they were: a refusal of what
// was given (usage, bad input), an output's failure, or memory (OutOfMemoryError: a budget too
// small, an allocation refused; std::bad_alloc). Any other failure (a GPU's: a CUDA error may
// leave its context unusable for good; a thread that cannot start, an internal error) drops
// them, and the next product makes its team anew.
void drop_teams_after_failure(KeptTeams& kept, const std::exception_ptr& error);

}  // namespace blockmm::backends
