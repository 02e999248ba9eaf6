// Checked CUDA calls: failures become ResourceError (exit 5) naming the call and CUDA's reason;
// an allocation refused, OutOfMemoryError.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

#define BLOCKMM_CUDA_CHECK(call)                                                                     \
  do {                                                                                               \
    const cudaError_t blockmm_cuda_rc_ = (call);                                                      \
    if (blockmm_cuda_rc_ == cudaErrorMemoryAllocation)                                                \
      throw ::blockmm::OutOfMemoryError(std::string("CUDA: ") + #call + ": " + cudaGetErrorString(blockmm_cuda_rc_)); \
    if (blockmm_cuda_rc_ != cudaSuccess)                                                              \
      throw ::blockmm::ResourceError(std::string("CUDA: ") + #call + ": " + cudaGetErrorString(blockmm_cuda_rc_)); \
  } while (0)
