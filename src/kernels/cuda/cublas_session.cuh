// The cuda backend's cuBLAS session: the library loaded on first use (cublas_loader.cuh), one
// handle a backend, made ready before the numeric phase where the dense path will likely run
// (loaded, a handle, its GEMM kernel chosen and loaded by one product of the dense path's shape
// family: dense_plan.hpp, WarmUpProduct), and lent to a numeric phase's compute stream.
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
  explicit CublasHandle(cudaStream_t stream) : blas_(CublasLibrary::get()) {
    BLOCKMM_CUBLAS_CHECK(blas_.create(&handle_));
    BLOCKMM_CUBLAS_CHECK(blas_.set_stream(handle_, stream));
    // Native float64 only: integer sums below 2^53 are then exact in any order.
    BLOCKMM_CUBLAS_CHECK(blas_.set_math_mode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~CublasHandle() { blas_.destroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  void set_stream(cudaStream_t stream) { BLOCKMM_CUBLAS_CHECK(blas_.set_stream(handle_, stream)); }
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
  cublasHandle_t handle_ = nullptr;
};

// cuBLAS made ready before the numeric phase: the library loaded, a handle created, and one
// product of the dense path's kind and shape family issued and waited for. Between numeric
// phases the handle works on its own stream.
struct ReadyCublas {
  Stream stream;
  CublasHandle handle{stream.get()};
};

// Whether the dense path (and so cuBLAS) will likely run: its choice needs only these counts
// (and a non-empty product).
bool dense_library_needed(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products,
                          const CudaChoices& choices);

// Loads the library; never throws (the numeric phase reports a failure where it needs cuBLAS).
void load_cublas();

class CublasSession {
 public:
  CublasSession(std::int64_t budget, const CudaChoices& choices) : budget_(budget), choices_(choices) {}
  // When the dense path will (likely) run, cuBLAS is made ready on a thread of its own, beside
  // the build or the symbolic phase, not inside the numeric phase; where the driver started the
  // load beside the context (preload_dense_library), that thread waits for that load. Once a
  // session.
  void prepare_if_dense(int device, std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products);
  // The handle (waiting for a preparation in flight, or made now), working on the pipeline's
  // compute stream until the pipeline goes, then on its own again.
  CublasHandle& attach(ChunkPipeline& pipeline);

 private:
  std::int64_t budget_;
  CudaChoices choices_;
  std::shared_ptr<ReadyCublas> ready_;
  std::future<std::shared_ptr<ReadyCublas>> preload_;  // last member: destroyed (waited for) first
};

}  // namespace blockmm::kernels::cuda
