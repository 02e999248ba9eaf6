// CudaStart (kernels/cuda_start.hpp): the driver's load, every GPU's context and staging, peer
// access between them, and cuBLAS's load, each on a thread of its own, waited for where a backend
// needs them.
#include <cuda_runtime.h>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/stopwatch.hpp"
#include "kernels/cuda/cublas_session.cuh"
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/staging_memory.cuh"
#include "kernels/cuda_start.hpp"

namespace blockmm::kernels {
namespace {

int count_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

// The device's context, and beside it the staging slots' host memory populated (while the
// context starts) and registered (once it exists), so that the build's first read waits for
// neither.
cuda::PreparedDevice prepare_device(int device, std::int64_t input_bytes, int threads) {
  const std::int64_t staging_bytes = cuda::StagingBuffers::slots_for(input_bytes, threads) * cuda::StagingBuffers::kSlotBytes;
  double populate_seconds = 0;
  std::future<cuda::HugePageMemory> memory = std::async(std::launch::async, [staging_bytes, &populate_seconds] {
    const Stopwatch clock;
    cuda::HugePageMemory populated(static_cast<std::size_t>(staging_bytes));
    populate_seconds = clock.seconds();
    return populated;
  });
  cuda::PreparedDevice prepared;
  const Stopwatch clock;
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return prepared;  // (the future's destructor waits for the memory, which goes with it)
  }
  prepared.steps.setup_context.add(clock.seconds());
  try {
    const Stopwatch wait;
    cuda::HugePageMemory populated = memory.get();
    prepared.steps.setup_wait_for_staging.add(wait.seconds());
    prepared.steps.setup_staging_populated.add(populate_seconds);
    const Stopwatch registering;
    prepared.staging = std::make_unique<cuda::RegisteredBuffer>(std::move(populated));
    prepared.steps.setup_staging_registered.add(registering.seconds());
    if (prepared.staging->get() == nullptr) prepared.staging.reset();  // not registered: the backend pins its own
  } catch (...) {  // no memory: the backend pins its own, or says what is wrong
  }
  return prepared;
}

// Peer access between every pair of `devices` that allows it, so that operands copied between
// them go over NVLink (or PCIe peer to peer) directly, not through host memory. Seconds taken.
double enable_peer_access(const std::vector<int>& devices) {
  const Stopwatch clock;
  for (const int d : devices) {
    if (cudaSetDevice(d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    for (const int e : devices) {
      int can = 0;
      if (e == d || cudaDeviceCanAccessPeer(&can, d, e) != cudaSuccess || can == 0) {
        (void)cudaGetLastError();
        continue;
      }
      const cudaError_t enabled = cudaDeviceEnablePeerAccess(e, 0);
      if (enabled != cudaSuccess) (void)cudaGetLastError();  // already enabled, or not possible: copies still work
    }
  }
  return clock.seconds();
}

}  // namespace

struct CudaStart::State {
  std::shared_future<int> driver;
  std::mutex lock;
  std::map<int, std::shared_future<std::shared_ptr<cuda::PreparedDevice>>> devices;
  std::shared_future<double> peers;  // seconds spent enabling peer access
  std::future<void> dense_library;
};

CudaStart::CudaStart(bool gpu_may_exist) : state_(std::make_unique<State>()) {
  std::promise<int> none;
  none.set_value(0);
  state_->driver = gpu_may_exist ? std::async(std::launch::async, count_devices).share() : none.get_future().share();
}

CudaStart::~CudaStart() {
  if (state_->dense_library.valid()) state_->dense_library.wait();
  if (state_->peers.valid()) state_->peers.wait();
  for (auto& [device, prepared] : state_->devices) prepared.wait();
}

int CudaStart::device_count() { return state_->driver.get(); }

std::string CudaStart::device_uuid(int device) {
  if (device < 0 || device >= device_count()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  static const char* const kHex = "0123456789abcdef";
  std::string text;
  for (const char byte : prop.uuid.bytes) {
    const auto bits = static_cast<unsigned char>(byte);
    text += kHex[bits >> 4];
    text += kHex[bits & 15];
  }
  return text;
}

void CudaStart::start_devices(const std::vector<int>& devices, std::int64_t input_bytes, int threads) {
  const int count = device_count();
  std::vector<std::shared_future<std::shared_ptr<cuda::PreparedDevice>>> started;
  std::vector<int> all;
  {
    const std::lock_guard<std::mutex> hold(state_->lock);
    for (const int d : devices) {
      if (d < 0 || d >= count || state_->devices.count(d) != 0) continue;
      state_->devices[d] = std::async(std::launch::async, [d, input_bytes, threads] {
                             return std::make_shared<cuda::PreparedDevice>(prepare_device(d, input_bytes, threads));
                           }).share();
    }
    for (const auto& [d, prepared] : state_->devices) {
      all.push_back(d);
      started.push_back(prepared);
    }
  }
  if (all.size() < 2) return;
  // Once every context exists, the pairs among them.
  const std::lock_guard<std::mutex> hold(state_->lock);
  state_->peers = std::async(std::launch::async, [started, all] {
                    for (const auto& prepared : started) prepared.wait();
                    return enable_peer_access(all);
                  }).share();
}

void CudaStart::preload_dense_library(const WorkEstimate& estimate, const CudaChoices& choices) {
  if (device_count() == 0 || state_->dense_library.valid()) return;
  state_->dense_library = std::async(std::launch::async, [estimate, choices] {
    if (cuda::dense_library_needed(estimate.n, estimate.m, estimate.rows, estimate.block_products, choices))
      cuda::load_cublas();
  });
}

std::unique_ptr<Backend> CudaStart::make_backend(const CudaConfig& config) {
  const int count = device_count();
  if (count == 0) throw ResourceError("the cuda backend needs a GPU, and none is visible");
  if (config.device < 0 || config.device >= count)
    throw ResourceError("GPU " + std::to_string(config.device) + " is not among the " + std::to_string(count) + " visible");
  std::shared_future<std::shared_ptr<cuda::PreparedDevice>> pending;
  std::shared_future<double> peers;
  {
    const std::lock_guard<std::mutex> hold(state_->lock);
    const auto it = state_->devices.find(config.device);
    if (it != state_->devices.end()) pending = it->second;
    peers = state_->peers;
  }
  cuda::PreparedDevice prepared;
  if (pending.valid()) {
    const Stopwatch wait;
    const std::shared_ptr<cuda::PreparedDevice> ready = pending.get();
    const std::lock_guard<std::mutex> hold(state_->lock);
    if (ready->steps.setup_context.measured) {  // the first backend on this GPU takes what was prepared
      prepared = std::move(*ready);
      ready->steps = {};
      prepared.steps.setup_wait_for_context.add(wait.seconds());
      if (peers.valid()) prepared.steps.setup_peer_access.add(peers.get());
    }
  }
  return cuda::make_cuda_backend(config, std::move(prepared));
}

}  // namespace blockmm::kernels
