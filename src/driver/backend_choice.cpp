#include "driver/backend_choice.hpp"

#include "build_info.hpp"
#include "core/error.hpp"
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
  int device = 0;
  try {
    if (!likely || !kernels::cuda_device_available()) return {};
    device = device_for(comm, kernels::cuda_device_count());
  } catch (const Error&) {
    return {};  // no usable GPU: choose_backend says so, or picks the CPU
  }
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
  if (kind != kernels::BackendKind::cuda) return kernels::make_backend(kind, config);
  // The user's one line says what to do; the failed CUDA call stays behind --verbose.
  const std::string advice = "; use --backend cpu, or --backend auto to take the GPU only when one is usable";
  if (!BLOCKMM_BUILD_CUDA) throw ResourceError("--backend cuda: no usable GPU, this blockmm was built without CUDA" + advice);
  try {
    const int devices = kernels::cuda_device_count();
    if (devices <= 0) throw ResourceError("no CUDA device is visible");
    config.device = device_for(comm, devices);
    config.device_sharers = (comm.node_size() + devices - 1 - config.device) / devices;
    return kernels::make_backend(kind, config);
  } catch (const Error& e) {
    if (e.code() == ExitCode::resource && std::string(e.what()).find("out of memory") != std::string::npos) throw;
    throw ResourceError("--backend cuda: no usable GPU was found" + advice +
                        (options.verbose ? std::string(" (cause: ") + e.what() + ")" : std::string()));
  }
}

}  // namespace blockmm::driver
