// What a CUDA process pays before and after its work, step by step (bench/NOTES.md, #15):
// driver load, context, pinned staging, cuBLAS load and handle, first kernel, teardown.
//   nvcc -O2 -o startup_probe startup_probe.cu -ldl && ./startup_probe [quick]
// "quick" skips the teardown (_exit): time the whole process from outside to see what that saves.
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "probe_util.cuh"

namespace {
using probe::check;
using probe::now;
__global__ void touch(int* p) { if (p) p[threadIdx.x] = threadIdx.x; }
}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && argv[1][0] == 'q';  // leave teardown to the kernel: _exit

  probe::Laps lap;
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); lap("driver load (cudaGetDeviceCount)");
  check(cudaSetDevice(0), "cudaSetDevice"); check(cudaFree(nullptr), "cudaFree"); lap("context (cudaFree(0))");
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, 64 << 20), "cudaMallocHost"); lap("cudaMallocHost 64 MiB");
  void* more = nullptr;
  check(cudaMallocHost(&more, 256 << 20), "cudaMallocHost"); lap("cudaMallocHost 256 MiB");
  int* d = nullptr;
  check(cudaMalloc(&d, 1 << 30), "cudaMalloc"); lap("cudaMalloc 1 GiB");
  touch<<<1, 32>>>(d); check(cudaDeviceSynchronize(), "touch"); lap("first kernel");
  void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("/usr/local/cuda/lib64/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  lap(lib ? "dlopen libcublas" : "dlopen libcublas FAILED");
  if (lib) {
    auto create = reinterpret_cast<cublasStatus_t (*)(cublasHandle_t*)>(dlsym(lib, "cublasCreate_v2"));
    cublasHandle_t h{};
    if (create && create(&h) == CUBLAS_STATUS_SUCCESS) lap("cublasCreate");
  }
  if (quick) { std::fflush(stdout); _exit(0); }
  check(cudaFree(d), "cudaFree"); lap("cudaFree 1 GiB");
  check(cudaFreeHost(more), "cudaFreeHost"); check(cudaFreeHost(pinned), "cudaFreeHost"); lap("cudaFreeHost");
  check(cudaDeviceReset(), "reset"); lap("cudaDeviceReset (teardown)");
  return 0;
}
