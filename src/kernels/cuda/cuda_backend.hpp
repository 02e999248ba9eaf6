// Entry points of the CUDA backend that host code may call. Host code includes this header
// only; kernels and CUDA headers stay in this folder's .cu files. In a build without CUDA the
// functions exist and report that the backend is unavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

// Devices the CUDA runtime can use here; 0 without a driver, a device or a CUDA build.
int cuda_device_count();

// config.device (its ordinal), config.device_sharers (ranks using it, which split its free
// memory) and config.cuda are what the backend reads.
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config);

// The device's UUID as 32 hex digits ("" when it cannot be asked): ranks compare it to learn
// which of them share a GPU, whatever ordinal each sees.
std::string cuda_device_uuid(int device);

// Creates the device's CUDA context (0.1-0.4 s), so that a caller can overlap it with reading
// the inputs, and pins beside it the staging slots that the build of `input_bytes` of records on
// `threads` readers and the numeric phase's copy-back will use; the next cuda backend made in this
// process takes them. Never throws; a failure shows again when the backend is made.
void warm_up_cuda(int device, std::int64_t input_bytes, int threads);

// Unpins what warm_up_cuda pinned and no cuda backend took: for a run that chose another backend.
void release_cuda_warm_up();

// Loads cuBLAS (several hundred MB: 0.06-0.08 s) where the dense path will probably run this
// work (the driver's estimate from the headers, the choices), so that the numeric phase finds it
// loaded. Blocks while it loads: call it on a thread of its own, beside the context's creation.
// Needs no context. Never throws; a failure shows again where the dense path needs the library.
void preload_dense_library(const BackendConfig::WorkEstimate& estimate, const CudaChoices& choices);

}  // namespace blockmm::kernels
