#include "driver/backend_choice.hpp"

#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::driver {

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
    // One rank per GPU by node-local rank; with more ranks than GPUs, ranks share them.
    // CUDA_VISIBLE_DEVICES (set by Slurm's --gpus-per-task, say) is honoured by the runtime.
    const int devices = kernels::cuda_device_count();
    config.device = devices > 0 ? comm.node_rank() % devices : 0;
  }
  return kernels::make_backend(kind, config);
}

}  // namespace blockmm::driver
