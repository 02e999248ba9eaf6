// Host side of the CUDA backend: device choice, upload of the A panel (CSR) and B (CSC) once,
// work units, and the chunk pipeline under a memory budget. Chunk c computes on one stream
// while chunk c-1 copies back into pinned memory on another and the host hands chunk c-2 to
// the sink (the output file), so the file write overlaps the GPU work.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels {
namespace {

using cuda::DeviceArray;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;
using cuda::WorkUnit;

template <typename To, typename From>
std::vector<To> narrow(const std::vector<From>& in) {
  std::vector<To> out(in.size());
  for (std::size_t e = 0; e < in.size(); ++e) out[e] = static_cast<To>(in[e]);
  return out;
}

template <typename T>
DeviceArray<T> upload(const std::vector<T>& host, cudaStream_t stream) {
  DeviceArray<T> device(host.size());
  if (!host.empty()) BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(device.get(), host.data(), device.bytes(), cudaMemcpyHostToDevice, stream));
  return device;
}

// Kernel choice for block size m: a compile-time instantiation, or the generic kernel.
struct KernelPlan {
  int tiles_per_unit = 1;
  bool generic = true;
};

KernelPlan plan_for(int m) {
  const char* force = std::getenv("BLOCKMM_CUDA_GENERIC");
  const bool forced = force != nullptr && force[0] == '1';
  switch (forced ? 0 : m) {
    case 1: return {cuda::FixedShape<1>::tiles_per_unit, false};
    case 2: return {cuda::FixedShape<2>::tiles_per_unit, false};
    case 4: return {cuda::FixedShape<4>::tiles_per_unit, false};
    case 8: return {cuda::FixedShape<8>::tiles_per_unit, false};
    case 16: return {cuda::FixedShape<16>::tiles_per_unit, false};
    case 32: return {cuda::FixedShape<32>::tiles_per_unit, false};
    default: return {cuda::generic_tiles_per_unit(m), true};
  }
}

void launch(const KernelPlan& plan, const cuda::TileParams& params, std::int64_t units, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned int>(units));
  const dim3 block(cuda::kThreadsPerUnit);
  if (plan.generic) {
    cuda::tile_kernel_generic<<<grid, block, 0, stream>>>(params, plan.tiles_per_unit);
  } else {
    switch (params.m) {
      case 1: cuda::tile_kernel_fixed<1><<<grid, block, 0, stream>>>(params); break;
      case 2: cuda::tile_kernel_fixed<2><<<grid, block, 0, stream>>>(params); break;
      case 4: cuda::tile_kernel_fixed<4><<<grid, block, 0, stream>>>(params); break;
      case 8: cuda::tile_kernel_fixed<8><<<grid, block, 0, stream>>>(params); break;
      case 16: cuda::tile_kernel_fixed<16><<<grid, block, 0, stream>>>(params); break;
      case 32: cuda::tile_kernel_fixed<32><<<grid, block, 0, stream>>>(params); break;
      default: throw Error(ExitCode::other, "internal error: no fixed CUDA kernel for m = " + std::to_string(params.m));
    }
  }
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
}

// Work units: each row's tiles cut into runs of at most tiles_per_unit.
std::vector<WorkUnit> make_units(const TilePattern& pattern, int tiles_per_unit) {
  std::vector<WorkUnit> units;
  const std::int32_t rows = pattern.row_end - pattern.row_begin;
  for (std::int32_t r = 0; r < rows; ++r)
    for (std::int64_t t = pattern.row_ptr[r]; t < pattern.row_ptr[r + 1]; t += tiles_per_unit)
      units.push_back({t, r, static_cast<std::int32_t>(std::min<std::int64_t>(tiles_per_unit, pattern.row_ptr[r + 1] - t))});
  return units;
}

struct Chunk {
  std::int64_t first_unit, units, first_tile, tiles;
};

std::vector<Chunk> make_chunks(const std::vector<WorkUnit>& units, std::int64_t max_tiles) {
  std::vector<Chunk> chunks;
  std::int64_t u = 0;
  while (u < static_cast<std::int64_t>(units.size())) {
    Chunk c{u, 0, units[u].first_tile, 0};
    while (u < static_cast<std::int64_t>(units.size()) && (c.tiles + units[u].tiles <= max_tiles || c.units == 0)) {
      c.tiles += units[u].tiles;
      ++c.units;
      ++u;
    }
    chunks.push_back(c);
  }
  return chunks;
}

// Waits for both streams on every exit path, so buffers are never freed under running work.
struct StreamDrain {
  const Stream& a;
  const Stream& b;
  ~StreamDrain() {
    cudaStreamSynchronize(a.get());
    cudaStreamSynchronize(b.get());
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, int sharers) : device_(device < 0 ? 0 : device), sharers_(std::max(1, sharers)) {
    int count = 0;
    BLOCKMM_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (count == 0) throw ResourceError("the cuda backend needs a GPU, and none is visible");
    if (device_ >= count) device_ %= count;
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    BLOCKMM_CUDA_CHECK(cudaFree(nullptr));  // create the context now, not inside the first timed phase
    cudaDeviceProp prop{};
    BLOCKMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    device_name_ = std::string("GPU ") + std::to_string(device_) + " (" + prop.name + ")";
  }

  std::string name() const override { return "cuda"; }

  // The exact mask-based symbolic phase runs on the host (OpenMP), where it shares the code
  // that the cpu backend's tests cover.
  TilePattern symbolic(const Operands& operands) override { return cpu_symbolic(operands); }

  NumericReport numeric(const Operands& ops, const TilePattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    NumericReport report;
    report.device = device_name_;
    if (pattern.tiles() == 0) return report;
    const int m = ops.a.shape.m;
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const KernelPlan plan = plan_for(m);

    Stream compute;
    Stream copy;
    StreamDrain drain{compute, copy};

    // Inputs, once. Block counts fit int32 (the file format's k is int32).
    const BlockMatrix& a = ops.a;
    const BlockMatrix& b = ops.b;
    const std::int64_t input_bytes =
        static_cast<std::int64_t>((a.row_ptr.size() + a.col.size() + b.col_ptr.size() + 2 * b.csc_row.size()) * 4 +
                                  (a.values.size() + b.values.size()) * 2);
    const std::int64_t budget = memory_budget(options);
    const std::int64_t per_tile = 2 * (stride + 4) + 2 * 16 / plan.tiles_per_unit + 1;  // double-buffered out, cols, units
    const std::int64_t room = budget - input_bytes;
    const std::int64_t min_tiles = plan.tiles_per_unit;
    if (room < min_tiles * per_tile)
      throw ResourceError("the cuda backend needs " + std::to_string((input_bytes + min_tiles * per_tile) >> 20) +
                          " MiB of device memory for this rank's inputs, more than the budget of " +
                          std::to_string(budget >> 20) + " MiB (raise --mem-budget, or use more ranks)");
    const std::int64_t chunk_tiles =
        std::max(min_tiles, std::min(room / per_tile, std::max<std::int64_t>(1, options.chunk_bytes / stride)));

    auto d_a_row_ptr = upload(narrow<std::int32_t>(a.row_ptr), compute.get());
    auto d_a_col = upload(a.col, compute.get());
    auto d_a_values = upload(a.values, compute.get());
    auto d_b_col_ptr = upload(narrow<std::int32_t>(b.col_ptr), compute.get());
    auto d_b_csc_row = upload(b.csc_row, compute.get());
    auto d_b_csc_block = upload(narrow<std::int32_t>(b.csc_block), compute.get());
    auto d_b_values = upload(b.values, compute.get());
    DeviceArray<unsigned int> d_zero_tiles(1);
    BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_zero_tiles.get(), 0, sizeof(unsigned int), compute.get()));

    const std::vector<WorkUnit> units = make_units(pattern, plan.tiles_per_unit);
    const std::vector<Chunk> chunks = make_chunks(units, chunk_tiles);
    std::int64_t max_units = 0;
    for (const Chunk& c : chunks) max_units = std::max(max_units, c.units);
    const std::int64_t buffer_tiles = std::min(chunk_tiles, pattern.tiles());

    DeviceArray<std::byte> d_out[2] = {DeviceArray<std::byte>(buffer_tiles * stride), DeviceArray<std::byte>(buffer_tiles * stride)};
    DeviceArray<std::int32_t> d_cols[2] = {DeviceArray<std::int32_t>(buffer_tiles), DeviceArray<std::int32_t>(buffer_tiles)};
    DeviceArray<WorkUnit> d_units[2] = {DeviceArray<WorkUnit>(max_units), DeviceArray<WorkUnit>(max_units)};
    PinnedBuffer host_out[2] = {PinnedBuffer(buffer_tiles * stride), PinnedBuffer(buffer_tiles * stride)};
    Event kernel_start[2] = {Event(true), Event(true)};
    Event kernel_end[2] = {Event(true), Event(true)};
    Event copied[2];

    cuda::TileParams params{};
    params.a_row_ptr = d_a_row_ptr.get();
    params.a_col = d_a_col.get();
    params.a_values = d_a_values.get();
    params.a_row_begin = a.row_begin;
    params.b_col_ptr = d_b_col_ptr.get();
    params.b_csc_row = d_b_csc_row.get();
    params.b_csc_block = d_b_csc_block.get();
    params.b_values = d_b_values.get();
    params.m = m;
    params.zero_tiles = d_zero_tiles.get();

    // Hands chunk c (already copied into host_out[c % 2]) to the sink.
    auto drain_chunk = [&](std::size_t c) {
      const int slot = static_cast<int>(c % 2);
      BLOCKMM_CUDA_CHECK(cudaEventSynchronize(copied[slot].get()));
      float ms = 0;
      BLOCKMM_CUDA_CHECK(cudaEventElapsedTime(&ms, kernel_start[slot].get(), kernel_end[slot].get()));
      report.compute_seconds += ms / 1e3;
      const auto start = std::chrono::steady_clock::now();
      sink.write(chunks[c].first_tile, chunks[c].tiles, host_out[slot].get());
      report.sink_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++report.chunks;
      if (options.progress) options.progress(chunks[c].first_tile + chunks[c].tiles);
    };

    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const int slot = static_cast<int>(c % 2);
      const Chunk& chunk = chunks[c];
      // d_out[slot] was last read by the copy of chunk c-2.
      if (c >= 2) BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(compute.get(), copied[slot].get(), 0));
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(d_units[slot].get(), units.data() + chunk.first_unit, chunk.units * sizeof(WorkUnit),
                                         cudaMemcpyHostToDevice, compute.get()));
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(d_cols[slot].get(), pattern.col.data() + chunk.first_tile,
                                         chunk.tiles * sizeof(std::int32_t), cudaMemcpyHostToDevice, compute.get()));
      params.units = d_units[slot].get();
      params.tile_col = d_cols[slot].get();
      params.chunk_first_tile = chunk.first_tile;
      params.out = d_out[slot].get();
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_start[slot].get(), compute.get()));
      launch(plan, params, chunk.units, compute.get());
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_end[slot].get(), compute.get()));
      // host_out[slot] held chunk c-2, which drain_chunk(c-2) wrote out in the previous iteration.
      BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(copy.get(), kernel_end[slot].get(), 0));
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(host_out[slot].get(), d_out[slot].get(), chunk.tiles * stride,
                                         cudaMemcpyDeviceToHost, copy.get()));
      BLOCKMM_CUDA_CHECK(cudaEventRecord(copied[slot].get(), copy.get()));
      if (c >= 1) drain_chunk(c - 1);  // overlaps with chunk c's kernel and copy
    }
    drain_chunk(chunks.size() - 1);

    unsigned int zero_tiles = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpy(&zero_tiles, d_zero_tiles.get(), sizeof zero_tiles, cudaMemcpyDeviceToHost));
    if (zero_tiles != 0)
      throw Error(ExitCode::other, "internal error: the CUDA numeric phase produced " + std::to_string(zero_tiles) +
                                       " all-zero tiles that the symbolic phase kept");
    return report;
  }

 private:
  // The explicit budget, else 80% of the free memory shared among the ranks on this GPU.
  std::int64_t memory_budget(const NumericOptions& options) const {
    if (options.device_memory_budget > 0) return options.device_memory_budget;
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<std::int64_t>(static_cast<double>(free_bytes) * 0.8 / sharers_);
  }

  int device_;
  int sharers_;
  std::string device_name_;
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

void warm_up_cuda(int device) {
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) (void)cudaGetLastError();
}

std::unique_ptr<Backend> make_cuda_backend(int device, int sharers) { return std::make_unique<CudaBackend>(device, sharers); }

}  // namespace blockmm::kernels
