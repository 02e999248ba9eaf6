// Stand-in for builds without CUDA (BLOCKMM_ENABLE_CUDA=OFF).
#include "core/error.hpp"
#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::kernels {

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& /*config*/) {
  throw ResourceError("the cuda backend is not in this build (configure with a CUDA compiler and BLOCKMM_ENABLE_CUDA=ON)");
}

std::string cuda_device_uuid(int /*device*/) { return ""; }

void warm_up_cuda(int /*device*/, std::int64_t /*input_bytes*/, int /*threads*/) {}

void release_cuda_warm_up() {}

void preload_dense_library(const BackendConfig::WorkEstimate& /*estimate*/, const CudaChoices& /*choices*/) {}

}  // namespace blockmm::kernels
