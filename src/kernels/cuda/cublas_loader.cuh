// cuBLAS, loaded on first use. The library is several hundred MB; linking it would make every
// start of blockmm load it (for a small product, longer than the work itself), also for runs
// that never take the dense path that needs it.
#pragma once

#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/error.hpp"

namespace blockmm::kernels::cuda {

class CublasLibrary {
 public:
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using Destroy = cublasStatus_t (*)(cublasHandle_t);
  using SetStream = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using SetMathMode = cublasStatus_t (*)(cublasHandle_t, cublasMath_t);
  using SetWorkspace = cublasStatus_t (*)(cublasHandle_t, void*, size_t);
  using Dgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                   const double*, const double*, int, const double*, int, const double*, double*, int);
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream set_stream = nullptr;
  SetMathMode set_math_mode = nullptr;
  SetWorkspace set_workspace = nullptr;
  Dgemm dgemm = nullptr;
  GemmEx gemm_ex = nullptr;

  // Throws ResourceError (exit 5) when cuBLAS cannot be loaded.
  static const CublasLibrary& get() {
    static const CublasLibrary library;
    if (library.handle_ == nullptr) throw ResourceError("cannot load cuBLAS for the dense GPU path: " + library.error_);
    return library;
  }

 private:
  CublasLibrary() {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    // The toolkit's library folder first (known at build time), then the loader's search path.
    for (const std::string& candidate : {std::string(BLOCKMM_CUDA_LIBRARY_DIR) + "/" + name, name}) {
      handle_ = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_ != nullptr) break;
      const char* why = ::dlerror();
      error_ = why != nullptr ? why : candidate + ": not found";
    }
    if (handle_ == nullptr) return;
    create = reinterpret_cast<Create>(::dlsym(handle_, "cublasCreate_v2"));
    destroy = reinterpret_cast<Destroy>(::dlsym(handle_, "cublasDestroy_v2"));
    set_stream = reinterpret_cast<SetStream>(::dlsym(handle_, "cublasSetStream_v2"));
    set_math_mode = reinterpret_cast<SetMathMode>(::dlsym(handle_, "cublasSetMathMode"));
    set_workspace = reinterpret_cast<SetWorkspace>(::dlsym(handle_, "cublasSetWorkspace_v2"));
    dgemm = reinterpret_cast<Dgemm>(::dlsym(handle_, "cublasDgemm_v2"));
    gemm_ex = reinterpret_cast<GemmEx>(::dlsym(handle_, "cublasGemmEx"));
    if (!create || !destroy || !set_stream || !set_math_mode || !set_workspace || !dgemm || !gemm_ex) {
      error_ = name + " lacks an expected symbol";
      handle_ = nullptr;
    }
  }

  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace blockmm::kernels::cuda
