// What a CUDA process pays at exit (bench/NOTES.md items 17, 23): the process exits with _exit
// right after its work, as blockmm does, printing the wall-clock time of that moment; the caller
// subtracts it from the time its wait returned.
//   nvcc -O2 -std=c++17 -arch=sm_90 -o exit_probe exit_probe.cu -ldl
//   ./exit_probe MODE...   modes, any together:
//     context   nothing but the context
//     memory    8 GB of device memory touched
//     copies    64 MiB pinned, 1 GiB up and 1 GiB down on four streams (unpin: the pinned
//               memory freed before the exit)
//     pinned    64 MiB pinned, nothing copied
//     cublas    cuBLAS loaded (dlopen), a handle, one int8 product of 2048^3
//     threads   16 threads spinning when the process exits (spin1: one thread)
//     sleepers  16 threads asleep on a condition variable when the process exits
//     reset     cudaDeviceReset timed before _exit
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_util.cuh"

namespace {
using probe::check;
using probe::now;

double wall_clock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void* copies() {
  void* host = nullptr;
  check(cudaMallocHost(&host, std::size_t{64} << 20), "cudaMallocHost");
  void* dev = nullptr;
  check(cudaMalloc(&dev, std::size_t{1} << 30), "cudaMalloc");
  cudaStream_t streams[4];
  for (cudaStream_t& s : streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  for (int i = 0; i < 16; ++i) {
    char* d = static_cast<char*>(dev) + (std::size_t{i} << 26);
    check(cudaMemcpyAsync(d, host, std::size_t{64} << 20, cudaMemcpyHostToDevice, streams[i % 4]), "up");
    check(cudaMemcpyAsync(host, d, std::size_t{64} << 20, cudaMemcpyDeviceToHost, streams[i % 4]), "down");
  }
  check(cudaDeviceSynchronize(), "sync");
  return host;
}

void cublas() {
  void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "no cuBLAS: %s\n", dlerror());
    std::exit(1);
  }
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
  auto gemm = reinterpret_cast<GemmEx>(dlsym(lib, "cublasGemmEx"));
  cublasHandle_t handle;
  if (create(&handle) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  const int n = 2048;
  void *a, *b, *c;
  check(cudaMalloc(&a, n * n), "a");
  check(cudaMalloc(&b, n * n), "b");
  check(cudaMalloc(&c, std::size_t{4} * n * n), "c");
  const int one = 1, zero = 0;
  if (gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_8I, n, b, CUDA_R_8I, n, &zero, c, CUDA_R_32I, n,
           CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
    std::exit(1);
  check(cudaDeviceSynchronize(), "gemm");
}

std::atomic<bool> spin{true};
}  // namespace

int main(int argc, char** argv) {
  std::string modes;
  for (int i = 1; i < argc; ++i) modes += std::string(" ") + argv[i] + " ";
  const auto has = [&](const char* mode) { return modes.find(std::string(" ") + mode + " ") != std::string::npos; };
  const double start = now();
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  const double context = now() - start;
  if (has("memory")) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::size_t{8} << 30), "cudaMalloc");
    check(cudaMemset(p, 1, std::size_t{8} << 30), "cudaMemset");
    check(cudaDeviceSynchronize(), "sync");
  }
  if (has("copies")) {
    void* pinned = copies();
    if (has("unpin")) check(cudaFreeHost(pinned), "cudaFreeHost");
  }
  if (has("pinned")) {
    void* host = nullptr;
    check(cudaMallocHost(&host, std::size_t{64} << 20), "cudaMallocHost");
  }
  if (has("cublas")) cublas();
  std::vector<std::thread> spinners;
  if (has("threads") || has("spin1"))
    for (int t = 0; t < (has("spin1") ? 1 : 16); ++t)
      spinners.emplace_back([] {
        while (spin.load(std::memory_order_relaxed)) {
        }
      });
  std::mutex lock;
  std::condition_variable never;
  if (has("sleepers"))
    for (int t = 0; t < 16; ++t)
      spinners.emplace_back([&] {
        std::unique_lock<std::mutex> hold(lock);
        never.wait(hold, [] { return false; });
      });
  if (has("sleepers")) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double reset = 0;
  if (has("reset")) {
    const double r = now();
    check(cudaDeviceReset(), "cudaDeviceReset");
    reset = now() - r;
  }
  std::printf("%s: context %.4f s, inside %.4f s, reset %.4f s, at %.6f\n", modes.c_str(), context, now() - start, reset,
              wall_clock());
  std::fflush(stdout);
  _exit(0);
}
