#include "driver/backend_choice.hpp"

#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::driver {

namespace {

// One rank per GPU by node-local rank; with more ranks than GPUs, ranks share them.
// CUDA_VISIBLE_DEVICES (set by Slurm's --gpus-per-task, say) is honoured by the runtime.
int device_for(const comm::Communicator& comm, int devices) { return devices > 0 ? comm.node_rank() % devices : 0; }

}  // namespace

std::shared_future<void> start_cuda_warm_up(const Options& options, const comm::Communicator& comm,
                                            std::int64_t input_bytes) {
  const bool likely = options.backend == "cuda" || (options.backend == "auto" && input_bytes >= kAutoCudaWarmUpInputBytes);
  if (!likely || !kernels::cuda_device_available()) return {};
  const int device = device_for(comm, kernels::cuda_device_count());
  return std::async(std::launch::async, [device] { kernels::warm_up_cuda(device); }).share();
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
  if (kind == kernels::BackendKind::cuda) {
    const int devices = kernels::cuda_device_count();
    config.device = device_for(comm, devices);
    config.device_sharers = devices > 0 ? (comm.node_size() + devices - 1 - config.device) / devices : 1;
  }
  return kernels::make_backend(kind, config);
}

}  // namespace blockmm::driver
