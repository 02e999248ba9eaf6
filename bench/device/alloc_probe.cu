// What device allocations cost (bench/NOTES.md item 17): cudaMalloc / cudaFree of the sizes the
// device build uses, against the stream-ordered pool (cudaMallocAsync / cudaFreeAsync) with a
// release threshold that keeps freed memory for the next allocation.
//   nvcc -O2 -std=c++17 -arch=sm_90 -o alloc_probe alloc_probe.cu && ./alloc_probe
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.cuh"

namespace {
using probe::check;
using probe::now;
__global__ void touch(char* p, std::size_t bytes) {
  for (std::size_t i = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) * 4096; i < bytes;
       i += std::size_t{gridDim.x} * blockDim.x * 4096)
    p[i] = 1;
}
}  // namespace

int main() {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  // One operand's arrays in D4's build (bytes): records, keys x2, index x2, flags, kept, position,
  // source, row, col, values, masks.
  const std::vector<std::size_t> sizes = {1320000000, 264000000, 264000000, 132000000, 132000000, 33000000, 132000000,
                                          132000000,  132000000, 132000000, 132000000, 1056000000, 264000000};
  for (int mode = 0; mode < 2; ++mode) {
    const bool pool = mode == 1;
    if (pool) {
      cudaMemPool_t p;
      check(cudaDeviceGetDefaultMemPool(&p, 0), "pool");
      std::uint64_t threshold = UINT64_MAX;
      check(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &threshold), "threshold");
    }
    for (int round = 0; round < 3; ++round) {
      std::vector<void*> ptrs;
      double t = now();
      for (std::size_t bytes : sizes) {
        void* q = nullptr;
        if (pool) {
          check(cudaMallocAsync(&q, bytes, cudaStreamLegacy), "cudaMallocAsync");
          check(cudaStreamSynchronize(cudaStreamLegacy), "sync");
        } else {
          check(cudaMalloc(&q, bytes), "cudaMalloc");
        }
        ptrs.push_back(q);
      }
      const double alloc = now() - t;
      t = now();
      for (std::size_t e = 0; e < sizes.size(); ++e) touch<<<1024, 256>>>(static_cast<char*>(ptrs[e]), sizes[e]);
      check(cudaDeviceSynchronize(), "touch");
      const double first_touch = now() - t;
      t = now();
      for (void* q : ptrs) {
        if (pool) {
          check(cudaDeviceSynchronize(), "sync");
          check(cudaFreeAsync(q, cudaStreamLegacy), "cudaFreeAsync");
        } else {
          check(cudaFree(q), "cudaFree");
        }
      }
      check(cudaDeviceSynchronize(), "sync");
      const double release = now() - t;
      std::printf("%-22s round %d: 13 allocations (%.2f GB) %7.3f ms, touch %6.3f ms, 13 frees %7.3f ms\n",
                  pool ? "pool (threshold max)" : "cudaMalloc/cudaFree", round, 4.22, alloc * 1e3, first_touch * 1e3,
                  release * 1e3);
    }
  }
  return 0;
}
