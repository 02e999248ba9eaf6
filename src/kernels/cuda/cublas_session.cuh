// The cuda backend's cuBLAS session: the library loaded on first use (cublas_loader.cuh), one
// handle a backend, made ready before the numeric phase where the dense path will likely run
// (loaded, a handle, its GEMM kernel chosen and loaded by one product of the dense path's shape
// family: dense_plan.hpp, WarmUpProduct), and lent to a numeric phase's compute stream. Its
// device memory is the ledger's (device_ledger.hpp): the workspace cuBLAS works in is a device
// array given to it (cublasSetWorkspace), not the pool the library would allocate for itself,
// and the warm-up's operands are allocated before its thread starts and freed once it is waited
// for, so that what the backend plans with never depends on where that thread is.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/chunk_pipeline.cuh"
#include "kernels/cuda/cublas_loader.cuh"
#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/device_memory.cuh"

#define BLOCKMM_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                               \
    const cublasStatus_t blockmm_blas_rc_ = (call);                                                   \
    if (blockmm_blas_rc_ != CUBLAS_STATUS_SUCCESS)                                                    \
      throw ::blockmm::ResourceError(std::string("cuBLAS: ") + #call + " failed with status " +       \
                                     std::to_string(static_cast<int>(blockmm_blas_rc_)));             \
  } while (0)

namespace blockmm::kernels::cuda {

// Dense products on one stream: float64 (column-major, C = A B) and int8 with int32
// accumulation (C = A^T B, A stored K x rows: the layout int8 tensor-core GEMMs take).
class CublasHandle {
 public:
  // Works in `workspace_bytes` at `workspace` (device memory, 256-byte aligned) on `stream`.
  CublasHandle(cudaStream_t stream, void* workspace, std::size_t workspace_bytes)
      : blas_(CublasLibrary::get()), workspace_(workspace), workspace_bytes_(workspace_bytes) {
    BLOCKMM_CUBLAS_CHECK(blas_.create(&handle_));
    set_stream(stream);
    // Native float64 only: integer sums below 2^53 are then exact in any order.
    BLOCKMM_CUBLAS_CHECK(blas_.set_math_mode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~CublasHandle() { blas_.destroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  // cublasSetStream gives the handle back the library's own workspace pool: ours is set again.
  void set_stream(cudaStream_t stream) {
    BLOCKMM_CUBLAS_CHECK(blas_.set_stream(handle_, stream));
    BLOCKMM_CUBLAS_CHECK(blas_.set_workspace(handle_, workspace_, workspace_bytes_));
  }
  void multiply(int rows, int cols, int k, const double* a, const double* b, double* c) {
    const double one = 1.0, zero = 0.0;
    BLOCKMM_CUBLAS_CHECK(blas_.dgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, k, &one, a, rows, b, k, &zero, c, rows));
  }
  void multiply(int rows, int cols, int k, const std::int8_t* a, const std::int8_t* b, std::int32_t* c) {
    multiply(rows, cols, k, a, k, b, k, c);
  }
  // The int8 product over k entries of operands whose leading dimension (lda, ldb) is longer: a K
  // piece of longer plane vectors.
  void multiply(int rows, int cols, int k, const std::int8_t* a, std::int64_t lda, const std::int8_t* b, std::int64_t ldb,
                std::int32_t* c) {
    const std::int32_t one = 1, zero = 0;
    BLOCKMM_CUBLAS_CHECK(blas_.gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, k, &one, a, CUDA_R_8I,
                                       static_cast<int>(lda), b, CUDA_R_8I, static_cast<int>(ldb), &zero, c, CUDA_R_32I,
                                       rows, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
  }

 private:
  const CublasLibrary& blas_;
  void* workspace_;
  std::size_t workspace_bytes_;
  cublasHandle_t handle_ = nullptr;
};

// cuBLAS made ready before the numeric phase: the library loaded, a handle created with its
// workspace, and one product of the dense path's kind and shape family issued and waited for.
// Between numeric phases the handle works on its own stream.
struct ReadyCublas {
  explicit ReadyCublas(DeviceArray<std::byte> workspace_memory) : workspace(std::move(workspace_memory)) {}
  Stream stream;
  DeviceArray<std::byte> workspace;
  CublasHandle handle{stream.get(), workspace.get(), workspace.bytes()};
};

// Whether the dense path (and so cuBLAS) will likely run: its choice needs only these counts
// (and a non-empty product).
bool dense_library_needed(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products,
                          const CudaChoices& choices);

// Loads the library; never throws (the numeric phase reports a failure where it needs cuBLAS).
void load_cublas();

class CublasSession {
 public:
  explicit CublasSession(const CudaChoices& choices) : choices_(choices) {}
  // When the dense path will (likely) run, cuBLAS is made ready on a thread of its own, beside
  // the build or the symbolic phase, not inside the numeric phase; where the driver started the
  // load beside the context (preload_dense_library), that thread waits for that load. Its
  // workspace and the warm-up's operands (at most a sixteenth of `room`, the bytes the backend
  // may still allocate) are allocated here, on the current device. Once a session, and only with
  // kEarlyCublasRoom of room; never throws (the numeric phase makes its own handle where this
  // could not).
  void prepare_if_dense(int device, std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products,
                        std::int64_t room);
  // Waits for a preparation in flight and frees the warm-up's operands: before a numeric phase
  // plans with its room.
  void settle();
  // The device memory make_ready(room) would take now (0 where a handle is ready), and a handle
  // ready, made now with a workspace for `room` where none was prepared: the dense path plans
  // without those bytes, then makes its handle.
  std::int64_t bytes_to_make_ready(std::int64_t room) const;
  void make_ready(std::int64_t room);
  // The handle (made ready, as make_ready), working on the pipeline's compute stream until the
  // pipeline goes, then on its own again.
  CublasHandle& attach(ChunkPipeline& pipeline);

 private:
  CudaChoices choices_;
  std::shared_ptr<ReadyCublas> ready_;
  std::shared_ptr<void> warm_up_operands_;  // device arrays the preparation's product uses
  std::future<std::shared_ptr<ReadyCublas>> preload_;  // last member: destroyed (waited for) first
};

}  // namespace blockmm::kernels::cuda
