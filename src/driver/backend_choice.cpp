#include "driver/backend_choice.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::driver {

namespace {

// One rank per GPU by node-local rank; with more ranks than GPUs, ranks share them.
// CUDA_VISIBLE_DEVICES (set by Slurm's --gpus-per-task, say) is honoured by the runtime.
int device_for(const comm::Communicator& comm, int devices) { return devices > 0 ? comm.node_rank() % devices : 0; }

// Developer settings for comparisons (bench/): the driver reads them, the backend only sees
// its config. BLOCKMM_CUDA_DENSE=1|0, BLOCKMM_CUDA_DENSE_TYPE=f64, BLOCKMM_CUDA_GENERIC=1,
// BLOCKMM_CUDA_BUILD=host|device.
kernels::CudaChoices cuda_choices_from_environment() {
  kernels::CudaChoices choices;
  const auto value = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  if (value("BLOCKMM_CUDA_DENSE") == "1") choices.dense = kernels::CudaChoices::Dense::always;
  if (value("BLOCKMM_CUDA_DENSE") == "0") choices.dense = kernels::CudaChoices::Dense::never;
  choices.dense_float64 = value("BLOCKMM_CUDA_DENSE_TYPE") == "f64";
  choices.generic_kernel = value("BLOCKMM_CUDA_GENERIC") == "1";
  if (value("BLOCKMM_CUDA_BUILD") == "host") choices.build = kernels::CudaChoices::Build::host;
  if (value("BLOCKMM_CUDA_BUILD") == "device") choices.build = kernels::CudaChoices::Build::device;
  return choices;
}

}  // namespace

std::shared_future<void> start_cuda_warm_up(const Options& options, const comm::Communicator& comm,
                                            std::int64_t input_bytes) {
  const bool likely = options.backend == "cuda" || (options.backend == "auto" && input_bytes >= kAutoCudaWarmUpInputBytes);
  if (!likely) return {};
  // Even asking for the device count loads the driver (about 0.1 s): all of it off this thread.
  const int node_rank = comm.node_rank();
  return std::async(std::launch::async, [node_rank] {
           if (!kernels::cuda_device_available()) return;
           const int devices = kernels::cuda_device_count();
           kernels::warm_up_cuda(devices > 0 ? node_rank % devices : 0);
         }).share();
}

std::int64_t estimated_rank_macs(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks, int ranks) {
  const double p = std::max(1, shape.block_rows());
  const double m = shape.m;
  const double macs = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / p * m * m * m / std::max(1, ranks);
  return macs >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(macs);
}

std::unique_ptr<kernels::Backend> choose_backend(const Options& options, const comm::Communicator& comm, int threads,
                                                 std::int64_t rank_macs) {
  kernels::BackendKind kind = kernels::BackendKind::cpu;
  if (options.backend == "auto") {
    if (rank_macs >= kAutoCudaMinMacs && kernels::cuda_device_available()) kind = kernels::BackendKind::cuda;
  } else {
    kind = kernels::parse_backend_kind(options.backend);
  }
  kernels::BackendConfig config;
  config.threads = threads;
  config.device_memory_budget = options.mem_budget;
  if (kind == kernels::BackendKind::cuda) {
    const int devices = kernels::cuda_device_count();
    config.device = device_for(comm, devices);
    config.device_sharers = devices > 0 ? (comm.node_size() + devices - 1 - config.device) / devices : 1;
    config.cuda = cuda_choices_from_environment();
  }
  return kernels::make_backend(kind, config);
}

}  // namespace blockmm::driver
