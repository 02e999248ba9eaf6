#include <cuda_runtime.h>

#include "core/error.hpp"
#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::kernels {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(int /*device*/) {
  throw ResourceError("the cuda backend is not implemented yet");
}

}  // namespace blockmm::kernels
