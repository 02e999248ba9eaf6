// What a CUDA process pays at exit (bench/NOTES.md item 17): the process exits with _exit right
// after its work, as blockmm does; time it from outside and compare with the inside figure.
//   nvcc -O2 -std=c++17 -arch=sm_90 -o exit_probe exit_probe.cu
//   ./exit_probe context|memory|reset   (memory: 8 GB of device memory touched first; reset:
//   cudaDeviceReset timed inside before _exit)
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "probe_util.cuh"

namespace {
using probe::check;
using probe::now;
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "context";
  const double start = now();
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  const double context = now() - start;
  if (mode == "memory" || mode == "reset") {
    void* p = nullptr;
    check(cudaMalloc(&p, std::size_t{8} << 30), "cudaMalloc");
    check(cudaMemset(p, 1, std::size_t{8} << 30), "cudaMemset");
    check(cudaDeviceSynchronize(), "sync");
  }
  double reset = 0;
  if (mode == "reset") {
    const double r = now();
    check(cudaDeviceReset(), "cudaDeviceReset");
    reset = now() - r;
  }
  std::printf("%s: context %.4f s, inside %.4f s, reset %.4f s\n", mode.c_str(), context, now() - start, reset);
  std::fflush(stdout);
  _exit(0);
}
