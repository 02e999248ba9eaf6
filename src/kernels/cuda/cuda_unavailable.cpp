// CUDA's start in builds without CUDA (BLOCKMM_ENABLE_CUDA=OFF): it finds no GPU.
#include "core/error.hpp"
#include "kernels/cuda_start.hpp"

namespace blockmm::kernels {

struct CudaStart::State {};

CudaStart::CudaStart(bool /*gpu_may_exist*/) {}
CudaStart::~CudaStart() = default;
int CudaStart::device_count() { return 0; }
std::string CudaStart::device_uuid(int /*device*/) { return ""; }
void CudaStart::start_devices(const std::vector<int>& /*devices*/, std::int64_t /*input_bytes*/, int /*threads*/) {}
void CudaStart::preload_dense_library(const WorkEstimate& /*estimate*/, const CudaChoices& /*choices*/) {}
std::unique_ptr<Backend> CudaStart::make_backend(const CudaConfig& /*config*/) {
  throw ResourceError("the cuda backend is not in this build (configure with a CUDA compiler and BLOCKMM_ENABLE_CUDA=ON)");
}

}  // namespace blockmm::kernels
