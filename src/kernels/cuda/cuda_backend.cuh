// The cuda backend's factory inside kernels/cuda: CudaStart (cuda_start.cu) makes each backend
// with what it prepared on that GPU.
#pragma once

#include <memory>

#include "core/backend_steps.hpp"

#include "kernels/cuda/staging_memory.cuh"
#include "kernels/cuda_start.hpp"

namespace blockmm::kernels::cuda {

// What CudaStart prepared on one GPU beside its context: pinned staging slots (null: the backend
// pins its own) and where that time went (the backend's steps, for --stats).
struct PreparedDevice {
  std::unique_ptr<RegisteredBuffer> staging;
  BackendSteps steps;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaConfig& config, PreparedDevice prepared);

}  // namespace blockmm::kernels::cuda
