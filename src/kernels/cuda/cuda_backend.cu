// Host side of the CUDA backend: device choice, upload of the A panel (CSR) and B (CSC) once,
// work units, and the chunk pipeline under a memory budget. Chunk c computes on one stream
// while chunk c-1 copies back into pinned memory on another and the host hands chunk c-2 to
// the sink (the output file), so the file write overlaps the GPU work.
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cublas_loader.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/dense_kernels.cuh"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels {
namespace {

using cuda::DeviceArray;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;
using cuda::WorkUnit;

template <typename To, typename Container>
std::vector<To> narrow(const Container& in) {
  std::vector<To> out(in.size());
  for (std::size_t e = 0; e < in.size(); ++e) out[e] = static_cast<To>(in[e]);
  return out;
}

template <typename Container>
DeviceArray<typename Container::value_type> upload(const Container& host, cudaStream_t stream) {
  DeviceArray<typename Container::value_type> device(host.size());
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

// Where the dense path starts to pay (bench/NOTES.md): float64 tiles on cuBLAS run about ten
// times the sparse kernels' multiply-add rate, so they win once the block products exceed
// this fraction of a dense product's.
constexpr double kDenseFraction = 0.05;

unsigned int grid_for(std::int64_t items) {
  return static_cast<unsigned int>(std::min<std::int64_t>((items + 255) / 256, std::int64_t{1} << 20));
}

#define BLOCKMM_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                               \
    const cublasStatus_t blockmm_blas_rc_ = (call);                                                   \
    if (blockmm_blas_rc_ != CUBLAS_STATUS_SUCCESS)                                                    \
      throw ResourceError(std::string("cuBLAS: ") + #call + " failed with status " +                  \
                          std::to_string(static_cast<int>(blockmm_blas_rc_)));                        \
  } while (0)

// Dense products on one stream: float64 (column-major, C = A B) and int8 with int32
// accumulation (C = A^T B, A stored K x rows: the layout int8 tensor-core GEMMs take).
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream) : blas_(cuda::CublasLibrary::get()) {
    BLOCKMM_CUBLAS_CHECK(blas_.create(&handle_));
    BLOCKMM_CUBLAS_CHECK(blas_.set_stream(handle_, stream));
    // Native float64 only: integer sums below 2^53 are then exact in any order.
    BLOCKMM_CUBLAS_CHECK(blas_.set_math_mode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~CublasHandle() { blas_.destroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  void multiply(int rows, int cols, int k, const double* a, const double* b, double* c) {
    const double one = 1.0, zero = 0.0;
    BLOCKMM_CUBLAS_CHECK(blas_.dgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, k, &one, a, rows, b, k, &zero, c, rows));
  }
  void multiply(int rows, int cols, int k, const std::int8_t* a, const std::int8_t* b, std::int32_t* c) {
    const std::int32_t one = 1, zero = 0;
    BLOCKMM_CUBLAS_CHECK(blas_.gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, k, &one, a, CUDA_R_8I, k, b,
                                       CUDA_R_8I, k, &zero, c, CUDA_R_32I, rows, CUBLAS_COMPUTE_32I,
                                       CUBLAS_GEMM_DEFAULT));
  }

 private:
  const cuda::CublasLibrary& blas_;
  cublasHandle_t handle_ = nullptr;
};

enum class DenseEncoding { int8_planes, float64 };

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

  // Uploads the A panel (CSR) and B (CSC, values in CSR order); block counts fit int32 (a
  // file's k is int32). Synchronous: from pageable memory the copies wait anyway.
  void prepare(const Operands& ops) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    const BlockMatrix& a = ops.a;
    const BlockMatrix& b = ops.b;
    DeviceOperands d;
    d.bytes = static_cast<std::int64_t>((a.row_ptr.size() + a.col.size() + b.col_ptr.size() + 2 * b.csc_row.size()) * 4 +
                                        (a.values.size() + b.values.size()) * 2);
    Stream stream;
    d.a_row_ptr = upload(narrow<std::int32_t>(a.row_ptr), stream.get());
    d.a_col = upload(a.col, stream.get());
    d.a_values = upload(a.values, stream.get());
    d.b_col_ptr = upload(narrow<std::int32_t>(b.col_ptr), stream.get());
    d.b_csc_row = upload(b.csc_row, stream.get());
    d.b_csc_block = upload(b.csc_block, stream.get());
    d.b_values = upload(b.values, stream.get());
    BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    operands_ = std::move(d);
  }

  // The exact mask-based symbolic phase runs on the host (OpenMP), where it shares the code
  // that the cpu backend's tests cover.
  TilePattern symbolic(const Operands& operands) override { return cpu_symbolic(operands); }

  NumericReport numeric(const Operands& ops, const TilePattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    NumericReport report;
    report.device = device_name_;
    if (pattern.tiles() == 0) return report;
    const BlockMatrix& a = ops.a;
    const int m = a.shape.m;

    Stream compute;
    Stream copy;
    StreamDrain drain{compute, copy};

    // Inputs, once (usually already uploaded by prepare(), beside the symbolic phase).
    if (!operands_) prepare(ops);
    const DeviceOperands& d = *operands_;
    // Room for everything but the inputs: an explicit budget less the inputs, or a share of
    // the memory still free now that the inputs are resident.
    const std::int64_t room = options.device_memory_budget > 0 ? options.device_memory_budget - d.bytes : free_memory_share();
    if (room <= 0)
      throw ResourceError("the cuda backend needs " + std::to_string((d.bytes >> 20) + 1) +
                          " MiB of device memory for this rank's inputs, more than the budget of " +
                          std::to_string(options.device_memory_budget >> 20) + " MiB (raise --mem-budget, or use more ranks)");
    DeviceArray<unsigned int> d_zero_tiles(1);
    BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_zero_tiles.get(), 0, sizeof(unsigned int), compute.get()));

    cuda::TileParams params{};
    params.a_row_ptr = d.a_row_ptr.get();
    params.a_col = d.a_col.get();
    params.a_values = d.a_values.get();
    params.a_row_begin = a.row_begin;
    params.b_col_ptr = d.b_col_ptr.get();
    params.b_csc_row = d.b_csc_row.get();
    params.b_csc_block = d.b_csc_block.get();
    params.b_values = d.b_values.get();
    params.m = m;
    params.zero_tiles = d_zero_tiles.get();

    if (use_dense_path(ops, pattern)) {
      const DenseEncoding encoding = dense_encoding(a.shape.n);
      report.device += encoding == DenseEncoding::int8_planes ? ", dense int8 byte-plane tiles (cuBLAS)"
                                                              : ", dense float64 tiles (cuBLAS)";
      numeric_dense(ops, pattern, sink, options, room, params, encoding, compute, copy, report);
    } else {
      numeric_sparse(ops, pattern, sink, options, room, params, compute, copy, report);
    }

    unsigned int zero_tiles = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpy(&zero_tiles, d_zero_tiles.get(), sizeof zero_tiles, cudaMemcpyDeviceToHost));
    if (zero_tiles != 0)
      throw Error(ExitCode::other, "internal error: the CUDA numeric phase produced " + std::to_string(zero_tiles) +
                                       " all-zero tiles that the symbolic phase kept");
    return report;
  }

 private:
  struct DeviceOperands {
    std::int64_t bytes = 0;
    DeviceArray<std::int32_t> a_row_ptr, a_col, b_col_ptr, b_csc_row, b_csc_block;
    DeviceArray<std::uint16_t> a_values, b_values;
  };
  std::optional<DeviceOperands> operands_;

  // A chunk of the output: tiles [first_tile, first_tile + tiles) of the panel.
  struct OutputChunk {
    std::int64_t first_tile, tiles;
  };

  // The double-buffered pipeline shared by both paths: enqueue(c, out) queues chunk c's
  // compute on `compute`, writing its records to `out`; then its copy to pinned memory on
  // `copy`; chunk c-1 is handed to the sink while chunk c runs.
  template <typename Enqueue>
  void run_pipeline(const std::vector<OutputChunk>& chunks, std::int64_t stride, RecordSink& sink,
                    const NumericOptions& options, const Stream& compute, const Stream& copy, NumericReport& report,
                    Enqueue&& enqueue) {
    std::int64_t buffer_tiles = 0;
    for (const OutputChunk& c : chunks) buffer_tiles = std::max(buffer_tiles, c.tiles);
    DeviceArray<std::byte> d_out[2] = {DeviceArray<std::byte>(buffer_tiles * stride),
                                       DeviceArray<std::byte>(buffer_tiles * stride)};
    PinnedBuffer host_out[2] = {PinnedBuffer(buffer_tiles * stride), PinnedBuffer(buffer_tiles * stride)};
    Event kernel_start[2] = {Event(true), Event(true)};
    Event kernel_end[2] = {Event(true), Event(true)};
    Event copied[2];

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
      // d_out[slot] was last read by the copy of chunk c-2.
      if (c >= 2) BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(compute.get(), copied[slot].get(), 0));
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_start[slot].get(), compute.get()));
      enqueue(c, slot, d_out[slot].get());
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_end[slot].get(), compute.get()));
      // host_out[slot] held chunk c-2, which drain_chunk(c-2) wrote out in the previous iteration.
      BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(copy.get(), kernel_end[slot].get(), 0));
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(host_out[slot].get(), d_out[slot].get(), chunks[c].tiles * stride,
                                         cudaMemcpyDeviceToHost, copy.get()));
      BLOCKMM_CUDA_CHECK(cudaEventRecord(copied[slot].get(), copy.get()));
      if (c >= 1) drain_chunk(c - 1);  // overlaps with chunk c's kernels and copy
    }
    if (!chunks.empty()) drain_chunk(chunks.size() - 1);
  }

  // Sparse path: the two-pointer tile kernels.
  void numeric_sparse(const Operands& ops, const TilePattern& pattern, RecordSink& sink, const NumericOptions& options,
                      std::int64_t room, cuda::TileParams params, const Stream& compute, const Stream& copy,
                      NumericReport& report) {
    const int m = ops.a.shape.m;
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const KernelPlan plan = plan_for(m);
    // Per tile: two output buffers, two column entries, and a share of a work unit.
    const std::int64_t per_tile = 2 * (stride + 4) + 2 * 16 / plan.tiles_per_unit + 1;
    const std::int64_t min_tiles = plan.tiles_per_unit;
    if (room < min_tiles * per_tile) throw budget_error(room, min_tiles * per_tile);
    const std::int64_t chunk_tiles =
        std::max(min_tiles, std::min(room / per_tile, std::max<std::int64_t>(1, options.chunk_bytes / stride)));

    const std::vector<WorkUnit> units = make_units(pattern, plan.tiles_per_unit);
    const std::vector<Chunk> unit_chunks = make_chunks(units, chunk_tiles);
    std::vector<OutputChunk> chunks;
    std::int64_t max_units = 0;
    for (const Chunk& c : unit_chunks) {
      chunks.push_back({c.first_tile, c.tiles});
      max_units = std::max(max_units, c.units);
    }
    std::int64_t max_tiles = 0;
    for (const OutputChunk& c : chunks) max_tiles = std::max(max_tiles, c.tiles);
    DeviceArray<std::int32_t> d_cols[2] = {DeviceArray<std::int32_t>(max_tiles), DeviceArray<std::int32_t>(max_tiles)};
    DeviceArray<WorkUnit> d_units[2] = {DeviceArray<WorkUnit>(max_units), DeviceArray<WorkUnit>(max_units)};

    run_pipeline(chunks, stride, sink, options, compute, copy, report, [&](std::size_t c, int slot, std::byte* out) {
      const Chunk& chunk = unit_chunks[c];
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(d_units[slot].get(), units.data() + chunk.first_unit,
                                         chunk.units * sizeof(WorkUnit), cudaMemcpyHostToDevice, compute.get()));
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(d_cols[slot].get(), pattern.col.data() + chunk.first_tile,
                                         chunk.tiles * sizeof(std::int32_t), cudaMemcpyHostToDevice, compute.get()));
      cuda::TileParams p = params;
      p.units = d_units[slot].get();
      p.tile_col = d_cols[slot].get();
      p.chunk_first_tile = chunk.first_tile;
      p.out = out;
      launch(plan, p, chunk.units, compute.get());
    });
  }

  // Dense path: panels of A and B expanded to dense tiles (int8 byte planes, or float64 where n
  // is too large for the planes' int32 sums: dense_kernels.cuh), multiplied by cuBLAS, and the
  // pattern's tiles gathered back. Chunks are runs of whole block-rows.
  void numeric_dense(const Operands& ops, const TilePattern& pattern, RecordSink& sink, const NumericOptions& options,
                     std::int64_t room, const cuda::TileParams& params, DenseEncoding encoding, const Stream& compute,
                     const Stream& copy, NumericReport& report) {
    const BlockMatrix& a = ops.a;
    const BlockMatrix& b = ops.b;
    const int m = a.shape.m;
    const std::int64_t n = a.shape.n;
    const std::int32_t p = a.shape.block_rows();
    const std::int32_t rows = a.rows_held();
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const bool planes = encoding == DenseEncoding::int8_planes;
    const auto padded = [&](std::int64_t x) { return planes ? cuda::pad_to_planes(x) : x; };

    // Tile sizes: at most a quarter of the room each for the A tile [ti x n], the B tile
    // [n x tj] and the product; A tiles at most 8192 rows (cuBLAS is at full speed well before
    // that). When B's whole width fits, it is expanded once and stays resident for every chunk.
    // The columns of every tile and the work units (at most one a tile) are resident too.
    const std::int64_t k_pitch = padded(n);
    const std::int64_t vector_bytes = planes ? 2 * k_pitch : 8 * n;  // an A tile row, a B tile column
    const std::int64_t product_bytes = planes ? 16 : 8;               // per output element
    const std::int64_t pad = planes ? cuda::kPlanePad : 0;
    const std::int64_t sums_bytes = planes ? 8 * (padded(8192) + k_pitch) : 0;
    const std::int64_t reserved = pattern.tiles() * 20 + sums_bytes;
    const std::int64_t quarter = (room - reserved) / 4;
    const std::int64_t least = 4 * vector_bytes * (m + pad) + reserved;
    const std::int32_t cols_per_tile =
        static_cast<std::int32_t>(std::min<std::int64_t>(p, (quarter / vector_bytes - pad) / m));
    if (cols_per_tile < 1) throw budget_error(room, least);
    const std::int64_t tile_cols_max = static_cast<std::int64_t>(cols_per_tile) * m;
    const std::int32_t max_rows_per_tile = static_cast<std::int32_t>(std::min<std::int64_t>(
        {std::max<std::int64_t>(1, 8192 / m), (quarter / vector_bytes - pad) / m,
         (quarter / (product_bytes * padded(tile_cols_max)) - pad) / m}));
    const bool b_resident = cols_per_tile == p;
    if (max_rows_per_tile < 1) throw budget_error(room, least);
    const std::int64_t chunk_tiles = std::max<std::int64_t>(1, std::min(options.chunk_bytes, room / 4) / (2 * stride));

    // Chunks: runs of rows with at most chunk_tiles tiles (or one row) and max_rows_per_tile rows.
    std::vector<OutputChunk> chunks;
    std::vector<std::int32_t> chunk_row;  // first panel row of each chunk, then the end
    for (std::int32_t r = 0; r < rows;) {
      std::int32_t r1 = r + 1;
      while (r1 < rows && r1 - r < max_rows_per_tile && pattern.row_ptr[r1 + 1] - pattern.row_ptr[r] <= chunk_tiles) ++r1;
      chunks.push_back({pattern.row_ptr[r], pattern.row_ptr[r1] - pattern.row_ptr[r]});
      chunk_row.push_back(r);
      r = r1;
    }
    chunk_row.push_back(rows);
    const std::int64_t tile_rows_max = static_cast<std::int64_t>(max_rows_per_tile) * m;
    const auto count = [](std::int64_t x) { return static_cast<std::size_t>(x); };
    // float64 tiles, or int8 planes [A_hi; A_lo] (2 padded rows, each k_pitch long), [B_hi, B_lo]
    // and their int32 product with its four quadrants; only one set is allocated.
    DeviceArray<double> d_a(planes ? 0 : count(tile_rows_max * n));
    DeviceArray<double> d_b(planes ? 0 : count(n * tile_cols_max));
    DeviceArray<double> d_c(planes ? 0 : count(tile_rows_max * tile_cols_max));
    DeviceArray<std::int8_t> d_a8(planes ? count(2 * padded(tile_rows_max) * k_pitch) : 0);
    DeviceArray<std::int8_t> d_b8(planes ? count(2 * padded(tile_cols_max) * k_pitch) : 0);
    DeviceArray<std::int32_t> d_c32(planes ? count(4 * padded(tile_rows_max) * padded(tile_cols_max)) : 0);
    DeviceArray<std::int32_t> d_a_sums(planes ? count(2 * padded(tile_rows_max)) : 0);
    DeviceArray<std::int32_t> d_b_sums(planes ? count(2 * padded(tile_cols_max)) : 0);
    // Every (chunk, column tile)'s work units, and every tile's column, go up once: copies
    // from pageable memory inside the loop would wait for the stream and stall the pipeline.
    const std::int32_t col_tiles = (p + cols_per_tile - 1) / cols_per_tile;
    std::vector<WorkUnit> units;
    std::vector<std::int64_t> unit_start;  // per (chunk, column tile), then the end
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
        unit_start.push_back(static_cast<std::int64_t>(units.size()));
        const std::int32_t j0 = jt * cols_per_tile, j1 = std::min(p, j0 + cols_per_tile);
        for (std::int32_t r = chunk_row[c]; r < chunk_row[c + 1]; ++r) {
          const auto first = pattern.col.begin() + pattern.row_ptr[r];
          const auto last = pattern.col.begin() + pattern.row_ptr[r + 1];
          const std::int64_t lo = std::lower_bound(first, last, j0) - pattern.col.begin();
          const std::int64_t hi = std::lower_bound(first, last, j1) - pattern.col.begin();
          for (std::int64_t t = lo; t < hi; t += cuda::kThreadsPerUnit)
            units.push_back({t, r, static_cast<std::int32_t>(std::min<std::int64_t>(cuda::kThreadsPerUnit, hi - t))});
        }
      }
    }
    unit_start.push_back(static_cast<std::int64_t>(units.size()));
    auto d_units = upload(units, compute.get());
    auto d_cols = upload(pattern.col, compute.get());
    CublasHandle blas(compute.get());
    bool b_expanded = false;

    // The encoding of value 0 (-128) for the n real entries of `vectors` plane vectors, 0 for
    // their padding (which then adds nothing to the product or the sums).
    const auto clear_planes = [&](std::int8_t* planes_data, std::int64_t vectors) {
      BLOCKMM_CUDA_CHECK(cudaMemsetAsync(planes_data, 0x80, count(vectors * k_pitch), compute.get()));
      if (k_pitch > n)
        BLOCKMM_CUDA_CHECK(cudaMemset2DAsync(planes_data + n, count(k_pitch), 0, count(k_pitch - n), count(vectors),
                                             compute.get()));
    };

    run_pipeline(chunks, stride, sink, options, compute, copy, report, [&](std::size_t c, int /*slot*/, std::byte* out) {
      const std::int32_t r0 = chunk_row[c], r1 = chunk_row[c + 1];
      const std::int32_t tile_rows = (r1 - r0) * m;
      const std::int64_t rows_padded = padded(tile_rows);
      const OutputChunk& chunk = chunks[c];
      const std::int64_t a_values = (a.row_ptr[r1] - a.row_ptr[r0]) * a.shape.block_values();
      const auto scatter_a = [&](auto tile) {
        if (a_values > 0)
          cuda::scatter_a_tile<<<grid_for(a_values), 256, 0, compute.get()>>>(
              params.a_row_ptr, params.a_col, params.a_values, m, r0, tile_rows,
              static_cast<std::int32_t>(a.row_ptr[r0]), a_values, tile);
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      };
      if (planes) {
        clear_planes(d_a8.get(), 2 * rows_padded);
        scatter_a(cuda::Int8PlanesA{d_a8.get(), k_pitch, rows_padded});
        cuda::vector_sums<<<static_cast<unsigned int>(2 * rows_padded), 256, 0, compute.get()>>>(d_a8.get(), k_pitch,
                                                                                               d_a_sums.get());
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      } else {
        BLOCKMM_CUDA_CHECK(
            cudaMemsetAsync(d_a.get(), 0, static_cast<std::size_t>(tile_rows) * n * sizeof(double), compute.get()));
        scatter_a(cuda::Float64Tile{d_a.get(), tile_rows});
      }
      for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
        const std::int64_t u0 = unit_start[c * col_tiles + jt], u1 = unit_start[c * col_tiles + jt + 1];
        if (u0 == u1) continue;  // no output tile of this chunk in these columns
        const std::int32_t j0 = jt * cols_per_tile, j1 = std::min(p, j0 + cols_per_tile);
        const std::int32_t tile_cols = (j1 - j0) * m;
        const std::int64_t cols_padded = padded(tile_cols);
        if (!b_resident || !b_expanded) {
          b_expanded = true;
          const std::int64_t b_values = (b.col_ptr[j1] - b.col_ptr[j0]) * b.shape.block_values();
          const auto scatter_b = [&](auto tile) {
            if (b_values > 0)
              cuda::scatter_b_tile<<<grid_for(b_values), 256, 0, compute.get()>>>(
                  params.b_col_ptr, params.b_csc_row, params.b_csc_block, params.b_values, m, j0, tile_cols,
                  static_cast<std::int32_t>(b.col_ptr[j0]), b_values, tile);
            BLOCKMM_CUDA_CHECK(cudaGetLastError());
          };
          if (planes) {
            clear_planes(d_b8.get(), 2 * cols_padded);
            scatter_b(cuda::Int8PlanesB{d_b8.get(), k_pitch, cols_padded});
            cuda::vector_sums<<<static_cast<unsigned int>(2 * cols_padded), 256, 0, compute.get()>>>(
                d_b8.get(), k_pitch, d_b_sums.get());
            BLOCKMM_CUDA_CHECK(cudaGetLastError());
          } else {
            BLOCKMM_CUDA_CHECK(
                cudaMemsetAsync(d_b.get(), 0, static_cast<std::size_t>(n) * tile_cols * sizeof(double), compute.get()));
            scatter_b(cuda::Float64Tile{d_b.get(), n});
          }
        }
        const unsigned int grid = static_cast<unsigned int>(u1 - u0);
        const cuda::WorkUnit* chunk_units = d_units.get() + u0;
        const std::int32_t* chunk_cols = d_cols.get() + chunk.first_tile;
        if (planes) {
          blas.multiply(static_cast<int>(2 * rows_padded), static_cast<int>(2 * cols_padded), static_cast<int>(k_pitch),
                        d_a8.get(), d_b8.get(), d_c32.get());
          const cuda::Int8PlanesProduct product{d_c32.get(), 2 * rows_padded, rows_padded, cols_padded,
                                                d_a_sums.get(), d_b_sums.get(), n};
          cuda::gather_records<<<grid, cuda::kThreadsPerUnit, 0, compute.get()>>>(
              chunk_units, chunk_cols, chunk.first_tile, product, r0, j0, a.row_begin, m, out, params.zero_tiles);
        } else {
          blas.multiply(tile_rows, tile_cols, static_cast<int>(n), d_a.get(), d_b.get(), d_c.get());
          cuda::gather_records<<<grid, cuda::kThreadsPerUnit, 0, compute.get()>>>(
              chunk_units, chunk_cols, chunk.first_tile, cuda::Float64Product{d_c.get(), tile_rows}, r0, j0,
              a.row_begin, m, out, params.zero_tiles);
        }
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      }
    });
  }

  // int8 byte planes where their int32 sums stay exact (n <= kInt8MaxOrder), else float64.
  // BLOCKMM_CUDA_DENSE_TYPE=f64 forces float64 (tests, comparisons).
  static DenseEncoding dense_encoding(std::int64_t n) {
    const char* force = std::getenv("BLOCKMM_CUDA_DENSE_TYPE");
    if (force != nullptr && std::string(force) == "f64") return DenseEncoding::float64;
    return n <= cuda::kInt8MaxOrder ? DenseEncoding::int8_planes : DenseEncoding::float64;
  }

  // Dense tiles pay when the block products are a good fraction of a dense product's, and
  // float64 stays exact (n < 2^21). BLOCKMM_CUDA_DENSE=1/0 forces the choice (tests).
  static bool use_dense_path(const Operands& ops, const TilePattern& pattern) {
    const std::int64_t n = ops.a.shape.n;
    if (n >= cuda::kDenseMaxOrder || pattern.tiles() == 0) return false;
    const char* force = std::getenv("BLOCKMM_CUDA_DENSE");
    if (force != nullptr && force[0] == '1') return true;
    if (force != nullptr && force[0] == '0') return false;
    const double m = ops.a.shape.m;
    const double useful = static_cast<double>(count_block_products(ops)) * m * m * m;
    const double dense = static_cast<double>(ops.a.rows_held()) * m * static_cast<double>(n) * static_cast<double>(n);
    return useful >= kDenseFraction * dense;
  }

  static ResourceError budget_error(std::int64_t room, std::int64_t need) {
    return ResourceError("the cuda backend needs " + std::to_string((need >> 20) + 1) +
                         " MiB of device memory beyond this rank's inputs, but the budget leaves " +
                         std::to_string(std::max<std::int64_t>(0, room) >> 20) +
                         " MiB (raise --mem-budget, or use more ranks)");
  }

  // 80% of the device's free memory, shared among the ranks on this GPU.
  std::int64_t free_memory_share() const {
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
