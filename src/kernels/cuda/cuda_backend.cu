// Host side of the CUDA backend: device choice, operands built on the device (device_build.cu;
// the host build uploaded where that would not fit the budget), work units, and the chunk
// pipeline under a memory budget. Chunk c computes on one stream while chunk c-1 is copied back
// through a ring of small pinned slots on another and handed to the sink (the output file) slot
// by slot, so the file write overlaps the GPU work.
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cublas_loader.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/dense_kernels.cuh"
#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/device_build.cuh"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/device_operands.cuh"
#include "operands/host_build.hpp"
#include "kernels/cuda/tile_kernel.cuh"

namespace blockmm::kernels {
namespace {

using cuda::DeviceArray;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;
using cuda::WorkUnit;

// Staging slots that warm_up_cuda pinned beside the context, for the first backend made after it
// (cudaHostRegisterDefault memory is portable: any device's backend can use it), and where the
// warm-up's time went (the backend's steps, for --stats).
struct PreparedStaging {
  std::unique_ptr<cuda::RegisteredBuffer> region;
  std::map<std::string, double> steps;
};
PreparedStaging& prepared_staging() {
  static PreparedStaging prepared;
  return prepared;
}
std::mutex& prepared_staging_lock() {
  static std::mutex lock;
  return lock;
}
PreparedStaging take_prepared_staging() {
  const std::lock_guard<std::mutex> lock(prepared_staging_lock());
  return std::exchange(prepared_staging(), PreparedStaging{});
}

// Seconds from `start` to now (the backend's steps, the pipeline's timeline).
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Kernel choice for block size m: a compile-time instantiation, or the generic kernel.
struct KernelPlan {
  int tiles_per_unit = 1;
  bool generic = true;
};

KernelPlan plan_for(int m, bool generic) {
  switch (generic ? 0 : m) {
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

// Work units: each row's tiles cut into runs of at most tiles_per_unit. The host walks its row
// pointers for their number and the chunks; the list itself is written on the device (E1 has a
// million rows and units, whose host list and upload cost more than its kernels).
std::int64_t count_units(const OutputLayout& layout, int tiles_per_unit) {
  std::int64_t units = 0;
  for (std::size_t r = 0; r + 1 < layout.row_ptr.size(); ++r)
    units += (layout.row_ptr[r + 1] - layout.row_ptr[r] + tiles_per_unit - 1) / tiles_per_unit;
  return units;
}

struct Chunk {
  std::int64_t first_unit, units, first_tile, tiles;
};

// Consecutive units of at most max_tiles tiles together (at least one unit a chunk).
std::vector<Chunk> make_chunks(const OutputLayout& layout, int tiles_per_unit, std::int64_t max_tiles) {
  std::vector<Chunk> chunks;
  Chunk chunk{0, 0, 0, 0};
  std::int64_t unit = 0;
  for (std::size_t r = 0; r + 1 < layout.row_ptr.size(); ++r)
    for (std::int64_t t = layout.row_ptr[r]; t < layout.row_ptr[r + 1]; t += tiles_per_unit, ++unit) {
      const std::int64_t tiles = std::min<std::int64_t>(tiles_per_unit, layout.row_ptr[r + 1] - t);
      if (chunk.units > 0 && chunk.tiles + tiles > max_tiles) {
        chunks.push_back(chunk);
        chunk.units = 0;
      }
      if (chunk.units == 0) chunk = {unit, 0, t, 0};
      chunk.tiles += tiles;
      ++chunk.units;
    }
  if (chunk.units > 0) chunks.push_back(chunk);
  return chunks;
}

DeviceArray<WorkUnit> device_units(const cuda::DevicePattern& pattern, int tiles_per_unit, std::int64_t count,
                                   cudaStream_t stream) {
  const std::int32_t rows = pattern.layout().row_end - pattern.layout().row_begin;
  DeviceArray<WorkUnit> units(static_cast<std::size_t>(count));
  if (count == 0) return units;
  DeviceArray<std::int64_t> per_row(static_cast<std::size_t>(rows)), first_unit(static_cast<std::size_t>(rows));
  cuda::row_unit_counts<<<cuda::grid_for(rows), 256, 0, stream>>>(pattern.d_row_ptr.get(), rows, tiles_per_unit,
                                                                  per_row.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, per_row.get(), first_unit.get(), rows, stream));
  DeviceArray<std::byte> scratch(bytes);
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch.get(), bytes, per_row.get(), first_unit.get(), rows, stream));
  cuda::fill_work_units<<<cuda::grid_for(std::int64_t{rows} * 32), 256, 0, stream>>>(
      pattern.d_row_ptr.get(), first_unit.get(), rows, tiles_per_unit, units.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // per_row, first_unit and scratch go now
  return units;
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
  void set_stream(cudaStream_t stream) { BLOCKMM_CUBLAS_CHECK(blas_.set_stream(handle_, stream)); }
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

// The numeric phase's streams, events and buffers in one owner. Its destructor waits for both
// streams before any member (or anything handed to keep()) is freed, also when a sink write
// throws half way.
//
// Chunk c computes into one of two device buffers while chunk c-1 is copied back through a ring
// of small pinned slots (the build's staging buffers: pinning costs about as much as copying, so
// no chunk-sized buffer is pinned) and handed to the sink slot by slot.
class ChunkPipeline {
 public:
  ChunkPipeline(const cuda::StagingBuffers& slots, int slot_count)
      : slots_(slots), slot_count_(std::max(1, slot_count)) {}
  ~ChunkPipeline() {
    cudaStreamSynchronize(compute_.get());
    cudaStreamSynchronize(copy_.get());
  }
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  cudaStream_t compute() const { return compute_.get(); }
  // Device memory (or a handle) that kernels on these streams use: freed only after them.
  template <typename T>
  T* keep(DeviceArray<T> array) {
    auto held = std::make_shared<DeviceArray<T>>(std::move(array));
    held_.push_back(held);
    return held->get();
  }
  template <typename T>
  T& keep_object(std::shared_ptr<T> object) {
    held_.push_back(object);
    return *object;
  }

  // A chunk of the output: tiles [first_tile, first_tile + tiles) of the panel.
  struct OutputChunk {
    std::int64_t first_tile, tiles;
  };
  // Where a run's time went besides the kernels (seconds): the host issuing the first chunk
  // (cuBLAS picks and loads its kernels there), the host waiting out the last chunk and its
  // copy-back, and the device's span from the first kernel to the last copy.
  struct Timeline {
    double first_issue = 0, last_drain = 0, device_span = 0;
  };
  const Timeline& timeline() const { return timeline_; }

  // enqueue(c, out) queues chunk c's compute on compute(), writing its records to `out`.
  template <typename Enqueue>
  void run(const std::vector<OutputChunk>& chunks, std::int64_t stride, RecordSink& sink, const NumericOptions& options,
           NumericReport& report, Enqueue&& enqueue) {
    std::int64_t buffer_tiles = 0;
    for (const OutputChunk& c : chunks) buffer_tiles = std::max(buffer_tiles, c.tiles);
    for (int s = 0; s < 2; ++s) d_out_[s] = DeviceArray<std::byte>(static_cast<std::size_t>(buffer_tiles * stride));
    // Host slots: the staging ring, or two record-sized buffers for records larger than a slot.
    std::vector<std::byte*> host_slots;
    std::int64_t slot_bytes = cuda::StagingBuffers::kSlotBytes;
    if (stride <= slot_bytes) {
      for (int s = 0; s < slot_count_; ++s) host_slots.push_back(slots_.slot(s));
    } else {
      slot_bytes = stride;
      for (PinnedBuffer& big : big_slots_) {
        big = PinnedBuffer(static_cast<std::size_t>(stride));
        host_slots.push_back(big.get());
      }
    }
    const std::int64_t piece_tiles = slot_bytes / stride;
    std::vector<Event> piece_copied(host_slots.size());
    struct Pending {
      std::int64_t first_tile, tiles;
      int slot;
    };
    std::vector<Pending> pending;  // copies issued, not yet written: oldest first
    std::size_t next_slot = 0;

    const auto write_oldest = [&] {
      const Pending piece = pending.front();
      pending.erase(pending.begin());
      BLOCKMM_CUDA_CHECK(cudaEventSynchronize(piece_copied[piece.slot].get()));
      const auto start = std::chrono::steady_clock::now();
      sink.write(piece.first_tile, piece.tiles, host_slots[piece.slot]);
      report.sink_seconds += seconds_since(start);
      if (options.progress) options.progress(piece.first_tile + piece.tiles);
    };
    // Copies chunk c back piece by piece (the copy stream follows its kernels) and writes it.
    const auto drain_chunk = [&](std::size_t c) {
      const int buffer = static_cast<int>(c % 2);
      BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), kernel_end_[buffer].get(), 0));
      for (std::int64_t t = 0; t < chunks[c].tiles; t += piece_tiles) {
        const int slot = static_cast<int>(next_slot++ % host_slots.size());
        if (pending.size() == host_slots.size()) write_oldest();  // frees the oldest slot, this one
        const std::int64_t tiles = std::min(piece_tiles, chunks[c].tiles - t);
        BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(host_slots[slot], d_out_[buffer].get() + t * stride,
                                           static_cast<std::size_t>(tiles * stride), cudaMemcpyDeviceToHost,
                                           copy_.get()));
        BLOCKMM_CUDA_CHECK(cudaEventRecord(piece_copied[slot].get(), copy_.get()));
        pending.push_back({chunks[c].first_tile + t, tiles, slot});
      }
      BLOCKMM_CUDA_CHECK(cudaEventRecord(copied_[buffer].get(), copy_.get()));
      while (!pending.empty()) write_oldest();
      // A chunk of empty rows copies nothing: wait for its kernels before timing them.
      BLOCKMM_CUDA_CHECK(cudaEventSynchronize(kernel_end_[buffer].get()));
      float ms = 0;
      BLOCKMM_CUDA_CHECK(cudaEventElapsedTime(&ms, kernel_start_[buffer].get(), kernel_end_[buffer].get()));
      report.compute_seconds += ms / 1e3;
      ++report.chunks;
    };
    using Clock = std::chrono::steady_clock;
    if (!chunks.empty()) BLOCKMM_CUDA_CHECK(cudaEventRecord(span_start_.get(), compute_.get()));
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const int buffer = static_cast<int>(c % 2);
      // d_out_[buffer] was last read by the copies of chunk c-2.
      if (c >= 2) BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copied_[buffer].get(), 0));
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_start_[buffer].get(), compute_.get()));
      const auto issue = Clock::now();
      enqueue(c, d_out_[buffer].get());
      if (c == 0) timeline_.first_issue += seconds_since(issue);
      BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_end_[buffer].get(), compute_.get()));
      if (c >= 1) drain_chunk(c - 1);  // while chunk c computes
    }
    if (chunks.empty()) return;
    const auto drain = Clock::now();
    drain_chunk(chunks.size() - 1);
    BLOCKMM_CUDA_CHECK(cudaEventRecord(span_end_.get(), copy_.get()));
    BLOCKMM_CUDA_CHECK(cudaEventSynchronize(span_end_.get()));
    timeline_.last_drain += seconds_since(drain);
    float ms = 0;
    BLOCKMM_CUDA_CHECK(cudaEventElapsedTime(&ms, span_start_.get(), span_end_.get()));
    timeline_.device_span += ms / 1e3;
  }

 private:
  const cuda::StagingBuffers& slots_;
  int slot_count_;
  Stream compute_;
  Stream copy_;
  DeviceArray<std::byte> d_out_[2];
  PinnedBuffer big_slots_[2];
  Event kernel_start_[2] = {Event(true), Event(true)};
  Event kernel_end_[2] = {Event(true), Event(true)};
  Event copied_[2];
  Event span_start_{true}, span_end_{true};
  Timeline timeline_;
  std::vector<std::shared_ptr<void>> held_;
};

using OutputChunk = ChunkPipeline::OutputChunk;

const cuda::DeviceOperand& device_operand(const Operand& operand) {
  const auto* device = dynamic_cast<const cuda::DeviceOperand*>(&operand);
  if (device == nullptr) throw Error(ExitCode::other, "internal error: an operand built by another backend");
  return *device;
}
const cuda::DevicePattern& device_pattern(const ProductPattern& pattern) {
  const auto* device = dynamic_cast<const cuda::DevicePattern*>(&pattern);
  if (device == nullptr) throw Error(ExitCode::other, "internal error: a pattern made by another backend");
  return *device;
}

// Whether the dense path (and so cuBLAS) will likely run: its choice needs only these counts
// (and a non-empty product).
bool dense_library_needed(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products,
                          const CudaChoices& choices) {
  cuda::DenseProblem probe;
  probe.n = n;
  probe.m = m;
  probe.rows = rows;
  probe.tiles = 1;
  probe.block_products = block_products;
  return block_products > 0 && cuda::dense_path_pays(probe, choices);
}

void load_cublas() {
  try {
    (void)cuda::CublasLibrary::get();  // a load in flight on another thread is waited for
  } catch (...) {  // the numeric phase reports it, where it needs the library
  }
}

// cuBLAS made ready before the numeric phase: the library loaded, a handle created, and one
// product of the dense path's kind and shape family issued and waited for (dense_plan.hpp,
// WarmUpProduct). Between numeric phases the handle works on its own stream.
struct ReadyCublas {
  cuda::Stream stream;
  CublasHandle handle{stream.get()};
};

std::shared_ptr<ReadyCublas> prepare_cublas(int device, std::int64_t n, cuda::DenseEncoding encoding, std::int64_t budget) {
  try {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device));
    auto ready = std::make_shared<ReadyCublas>();
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const cuda::WarmUpProduct warm = cuda::warm_up_product(n, encoding, static_cast<std::int64_t>(free_bytes), budget);
    if (warm.rows == 0) return ready;
    // Operands of element type In, product of type Out: the handle's two multiply() forms.
    const auto issue = [&](auto in, auto out) {
      using In = decltype(in);
      using Out = decltype(out);
      const auto count = [](std::int64_t x, std::int64_t y) { return static_cast<std::size_t>(x * y); };
      DeviceArray<In> a(count(warm.rows, warm.k)), b(count(warm.cols, warm.k));
      DeviceArray<Out> c(count(warm.rows, warm.cols));
      ready->handle.multiply(warm.rows, warm.cols, warm.k, a.get(), b.get(), c.get());
      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(ready->stream.get()));
    };
    if (warm.float64)
      issue(double{}, double{});
    else
      issue(std::int8_t{}, std::int32_t{});
    return ready;
  } catch (...) {  // the numeric phase makes its own handle, and reports what fails there
    return nullptr;
  }
}

// Whether this process's contexts on `device` are an MPS server's, shared with the node's other
// clients: the run's device name says so, since it changes what the start and the end of a run
// cost (bench/NOTES.md item 26) and who else holds the GPU's memory. A driver or toolkit that
// does not know the attribute leaves it unsaid.
bool shared_via_mps(int device) {
#if CUDART_VERSION >= 12030
  int mps = 0;
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) == cudaSuccess) return mps != 0;
  (void)cudaGetLastError();  // an unknown attribute is not the run's error
#else
  (void)device;
#endif
  return false;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendConfig& config)
      : device_(config.device < 0 ? 0 : config.device),
        sharers_(std::max(1, config.device_sharers)),
        threads_(config.threads > 0 ? config.threads : omp_get_max_threads()),
        budget_(config.device_memory_budget),
        choices_(config.cuda) {
    int count = 0;
    BLOCKMM_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (count == 0) throw ResourceError("the cuda backend needs a GPU, and none is visible");
    if (device_ >= count) device_ %= count;
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    BLOCKMM_CUDA_CHECK(cudaFree(nullptr));  // create the context now, not inside the first timed phase
    PreparedStaging prepared = take_prepared_staging();
    staging_.adopt(std::move(prepared.region));
    for (const auto& [step, seconds] : prepared.steps) steps_[step] += seconds;
    cudaDeviceProp prop{};
    BLOCKMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    device_name_ =
        std::string("GPU ") + std::to_string(device_) + " (" + prop.name + (shared_via_mps(device_) ? ", CUDA MPS" : "") + ")";
    if (config.estimate.block_products > 0)
      preload_cublas_if_dense(config.estimate.n, config.estimate.m, config.estimate.rows, config.estimate.block_products);
  }

  std::string name() const override { return "cuda"; }

  std::map<std::string, double> step_seconds() const override { return steps_; }

  // On the device when its peak fits the memory left (or when asked), else the host build
  // uploaded: the same operand either way.
  std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    const std::int64_t available = budget_ > 0 ? budget_ - resident_bytes_ : free_memory_share();
    const bool on_device = choices_.build == CudaChoices::Build::device ||
                           (choices_.build == CudaChoices::Build::automatic &&
                            cuda::device_build_bytes(records, spec) <= available);
    std::unique_ptr<cuda::DeviceOperand> operand;
    if (on_device) {
      cuda::BuildContext context;
      context.device = device_;
      context.threads = threads_;
      context.staging = &staging_;
      context.read_upload_seconds = &steps_["build: read + upload"];
      context.pin_seconds = &steps_["build: pin staging slots"];
      context.device_seconds = &steps_["build: on the device"];
      operand = cuda::build_on_device(records, spec, context, stream.get());
    } else {
      const InputRecords all = records.take();
      const BlockMatrix matrix =
          operands::build_block_matrix(all, spec.row_begin, spec.row_end, spec.role, spec.duplicate_message);
      operand = cuda::upload_host_operand(matrix, spec.role, stream.get());
    }
    resident_bytes_ += operand->device_bytes();
    built_on_device_ = built_on_device_ && operand->built_on_device;
    return operand;
  }

  // Both whole inputs built on the device (never by the host fallback), when their builds'
  // peaks fit the memory together: B stays resident while A is built.
  bool builds_whole_inputs(const RecordSource& a, const RecordSource& b) const override {
    if (choices_.build == CudaChoices::Build::host) return false;
    if (a.size() > std::int64_t{INT32_MAX} || b.size() > std::int64_t{INT32_MAX}) return false;  // the device build's limit
    const std::int32_t p = a.shape().block_rows();
    const std::int64_t available = budget_ > 0 ? budget_ - resident_bytes_ : free_memory_share();
    return cuda::device_build_bytes(a, {0, p, OperandRole::left, {}}) +
               cuda::device_build_bytes(b, {0, p, OperandRole::right, {}}) <=
           available;
  }

  std::vector<std::int64_t> row_products(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    return cuda::device_row_products(device_operand(a), device_operand(b), stream.get());
  }

  std::unique_ptr<Operand> slice_rows(std::unique_ptr<Operand> a, std::int32_t row_begin, std::int32_t row_end) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    const cuda::DeviceOperand& whole = device_operand(*a);
    std::unique_ptr<cuda::DeviceOperand> slice = cuda::slice_device_rows(whole, row_begin, row_end, stream.get());
    resident_bytes_ += slice->device_bytes() - whole.device_bytes();
    return slice;
  }

  std::int64_t block_products(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    const cuda::DeviceOperand& a_operand = device_operand(a);
    const std::int64_t products = cuda::device_block_products(a_operand, device_operand(b), stream.get());
    preload_cublas_if_dense(a_operand.shape.n, a_operand.shape.m, a_operand.rows_held(), products);
    return products;
  }

  std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    // Scratch for one batch of rows: a quarter of the room (at least 64 MiB; a row that needs
    // more is a batch alone).
    const std::int64_t room = budget_ > 0 ? budget_ - resident_bytes_ : free_memory_share();
    const std::int64_t batch_bytes = choices_.symbolic_batch_bytes > 0 ? choices_.symbolic_batch_bytes
                                                                       : std::max<std::int64_t>(std::int64_t{64} << 20, room / 4);
    auto pattern = cuda::device_symbolic(device_operand(a), device_operand(b), batch_bytes, stream.get());
    pattern_bytes_ = pattern->device_bytes();
    return pattern;
  }

  NumericReport numeric(const Operand& a_operand, const Operand& b_operand, const ProductPattern& product_pattern,
                        RecordSink& sink, const NumericOptions& options) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    const cuda::DeviceOperand& a = device_operand(a_operand);
    const cuda::DeviceOperand& b = device_operand(b_operand);
    const cuda::DevicePattern& pattern = device_pattern(product_pattern);
    const auto numeric_start = std::chrono::steady_clock::now();
    NumericReport report;
    report.device = device_name_ + (built_on_device_ ? "" : ", operands built on the host");
    if (pattern.tiles() == 0) return report;
    const int m = a.shape.m;

    // Room for everything but the operands and the pattern: an explicit budget less those, or a
    // share of the memory still free now that they are resident.
    const std::int64_t budget = options.device_memory_budget > 0 ? options.device_memory_budget : budget_;
    const std::int64_t resident = resident_bytes_ + pattern_bytes_;
    const std::int64_t room = budget > 0 ? budget - resident : free_memory_share();
    if (room <= 0)
      throw ResourceError("the cuda backend needs " + std::to_string((resident >> 20) + 1) +
                          " MiB of device memory for this rank's operands, more than the budget of " +
                          std::to_string(budget >> 20) + " MiB (raise --mem-budget, or use more ranks)");

    // Copy-back through the staging slots (pinned for the build; pinned here if it ran on the host).
    const auto pin_start = std::chrono::steady_clock::now();
    staging_.reserve(cuda::StagingBuffers::kCopyBackSlots);
    steps_["numeric: pin copy-back slots"] += seconds_since(pin_start);
    ChunkPipeline pipeline(staging_, cuda::StagingBuffers::kCopyBackSlots);
    unsigned int* zero_tiles = pipeline.keep(DeviceArray<unsigned int>(1));
    BLOCKMM_CUDA_CHECK(cudaMemsetAsync(zero_tiles, 0, sizeof(unsigned int), pipeline.compute()));

    cuda::TileParams params{};
    params.a_row_ptr = a.d_row_ptr.get();
    params.a_col = a.d_col.get();
    params.a_values = a.d_values.get();
    params.a_row_begin = a.row_begin;
    params.b_col_ptr = b.d_col_ptr.get();
    params.b_csc_row = b.d_csc_row.get();
    params.b_csc_block = b.d_csc_block.get();
    params.b_values = b.d_values.get();
    params.m = m;
    params.zero_tiles = zero_tiles;

    cuda::DenseProblem problem;
    problem.n = a.shape.n;
    problem.m = m;
    problem.rows = a.rows_held();
    problem.tiles = pattern.tiles();
    problem.block_products = pattern.block_products;
    problem.room = room;
    problem.chunk_bytes = options.chunk_bytes;
    problem.record_bytes = record_bytes<std::uint32_t>(m);
    if (cuda::dense_path_pays(problem, choices_)) {
      const cuda::DenseEncoding encoding =
          cuda::dense_encoding(a.shape.n, largest_value(a, b, pipeline.compute()), choices_);
      steps_["numeric: to the dense plan"] += seconds_since(numeric_start);
      report.device += std::string(", ") + cuda::describe(encoding);
      numeric_dense(a, b, pattern, sink, options, cuda::plan_dense(problem, encoding), params, pipeline, report);
    } else {
      numeric_sparse(a, pattern, sink, options, room, params, pipeline, report);
    }

    steps_["numeric: issue the first chunk (host)"] += pipeline.timeline().first_issue;
    steps_["numeric: drain the last chunk (host)"] += pipeline.timeline().last_drain;
    steps_["numeric: first kernel to last copy (device)"] += pipeline.timeline().device_span;
    unsigned int zero_count = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(&zero_count, zero_tiles, sizeof zero_count, cudaMemcpyDeviceToHost, pipeline.compute()));
    BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(pipeline.compute()));
    if (zero_count != 0)
      throw Error(ExitCode::other, "internal error: the CUDA numeric phase produced " + std::to_string(zero_count) +
                                       " all-zero tiles that the symbolic phase kept");
    return report;
  }

 private:
  // Sparse path: the two-pointer tile kernels.
  void numeric_sparse(const cuda::DeviceOperand& a, const cuda::DevicePattern& pattern, RecordSink& sink,
                      const NumericOptions& options, std::int64_t room, cuda::TileParams params, ChunkPipeline& pipeline,
                      NumericReport& report) {
    const int m = a.shape.m;
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const KernelPlan plan = plan_for(m, choices_.generic_kernel);
    const std::int64_t unit_count = count_units(pattern.layout(), plan.tiles_per_unit);
    // Per tile: two output buffers and a share of a work unit; the units are all on the device.
    const std::int64_t units_bytes = unit_count * static_cast<std::int64_t>(sizeof(WorkUnit));
    const std::int64_t per_tile = 2 * stride + 1;
    const std::int64_t min_tiles = plan.tiles_per_unit;
    if (room - units_bytes < min_tiles * per_tile) throw cuda::budget_error(room, units_bytes + min_tiles * per_tile);
    const std::int64_t chunk_tiles =
        std::max(min_tiles, std::min((room - units_bytes) / per_tile, std::max<std::int64_t>(1, options.chunk_bytes / stride)));
    const std::vector<Chunk> unit_chunks = make_chunks(pattern.layout(), plan.tiles_per_unit, chunk_tiles);
    std::vector<OutputChunk> chunks;
    for (const Chunk& c : unit_chunks) chunks.push_back({c.first_tile, c.tiles});
    const WorkUnit* d_units =
        pipeline.keep(device_units(pattern, plan.tiles_per_unit, unit_count, pipeline.compute()));

    pipeline.run(chunks, stride, sink, options, report, [&](std::size_t c, std::byte* out) {
      const Chunk& chunk = unit_chunks[c];
      cuda::TileParams p = params;
      p.units = d_units + chunk.first_unit;
      p.tile_col = pattern.d_col.get() + chunk.first_tile;
      p.chunk_first_tile = chunk.first_tile;
      p.out = out;
      launch(plan, p, chunk.units, pipeline.compute());
    });
  }

  // The largest value of both operands' blocks (which int8 encoding is exact): one pass over
  // their values, about 0.3 ms a GB.
  static std::uint32_t largest_value(const cuda::DeviceOperand& a, const cuda::DeviceOperand& b, cudaStream_t stream) {
    DeviceArray<unsigned int> largest(1);
    BLOCKMM_CUDA_CHECK(cudaMemsetAsync(largest.get(), 0, sizeof(unsigned int), stream));
    for (const cuda::DeviceOperand* operand : {&a, &b}) {
      const std::int64_t count = operand->blocks() * operand->shape.block_values();
      if (count == 0) continue;
      cuda::largest_value<<<std::min(cuda::grid_for(count / 8), 2048u), 256, 0, stream>>>(
          operand->d_values.get(), count, largest.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    }
    unsigned int host = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(&host, largest.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
    BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
  }

  // Dense path: panels of A and B expanded to dense tiles (int8 planes, as few as the values
  // allow, or float64 where n is too large for their int32 sums: dense_kernels.cuh), multiplied
  // by cuBLAS, and the pattern's tiles gathered back. Chunks are runs of whole block-rows
  // (dense_plan.hpp).
  void numeric_dense(const cuda::DeviceOperand& a, const cuda::DeviceOperand& b, const cuda::DevicePattern& pattern,
                     RecordSink& sink, const NumericOptions& options, const cuda::DensePlan& plan,
                     const cuda::TileParams& params, ChunkPipeline& pipeline, NumericReport& report) {
    const cudaStream_t compute = pipeline.compute();
    const int m = a.shape.m;
    const std::int64_t n = a.shape.n;
    const std::int32_t p = a.shape.block_rows();
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const cuda::DenseEncoding encoding = plan.encoding;
    const bool planes = encoding != cuda::DenseEncoding::float64;  // int8 plane vectors
    const bool offset_sums = encoding == cuda::DenseEncoding::int8_planes;
    const int plane_count = cuda::planes_of(encoding);
    const auto padded = [&](std::int64_t x) { return planes ? cuda::pad_to_planes(x) : x; };
    const std::int64_t k_pitch = plan.k_pitch;
    const std::int32_t cols_per_tile = plan.cols_per_tile;
    const std::int32_t col_tiles = plan.col_tiles;
    const OutputLayout& layout = pattern.layout();

    const auto setup_start = std::chrono::steady_clock::now();
    const std::vector<std::int32_t> chunk_row = cuda::dense_chunk_rows(plan, layout.row_ptr);
    std::vector<OutputChunk> chunks;
    for (std::size_t c = 0; c + 1 < chunk_row.size(); ++c)
      chunks.push_back({layout.row_ptr[chunk_row[c]], layout.row_ptr[chunk_row[c + 1]] - layout.row_ptr[chunk_row[c]]});
    // A tiles as large as the largest chunk (at most the plan's rows: fewer where the chunks,
    // not the room, limit the rows; G1's products took 3.2 GB for chunks that use 0.6 GB).
    std::int32_t chunk_rows_max = 0;
    for (std::size_t c = 0; c + 1 < chunk_row.size(); ++c) chunk_rows_max = std::max(chunk_rows_max, chunk_row[c + 1] - chunk_row[c]);
    const std::int64_t tile_rows_max = static_cast<std::int64_t>(chunk_rows_max) * m;
    const std::int64_t tile_cols_max = static_cast<std::int64_t>(cols_per_tile) * m;
    const auto count = [](std::int64_t x) { return static_cast<std::size_t>(x); };
    // float64 tiles, or int8 plane vectors (each k_pitch long: the planes of the A tile's padded
    // rows one after the other, likewise B's columns) and their int32 products (the byte planes'
    // one GEMM of four quadrants, or one product a plane); only one set is allocated.
    double* d_a = pipeline.keep(DeviceArray<double>(planes ? 0 : count(tile_rows_max * n)));
    double* d_b = pipeline.keep(DeviceArray<double>(planes ? 0 : count(n * tile_cols_max)));
    double* d_c = pipeline.keep(DeviceArray<double>(planes ? 0 : count(tile_rows_max * tile_cols_max)));
    std::int8_t* d_a8 =
        pipeline.keep(DeviceArray<std::int8_t>(planes ? count(plane_count * padded(tile_rows_max) * k_pitch) : 0));
    std::int8_t* d_b8 =
        pipeline.keep(DeviceArray<std::int8_t>(planes ? count(plane_count * padded(tile_cols_max) * k_pitch) : 0));
    std::int32_t* d_c32 = pipeline.keep(DeviceArray<std::int32_t>(
        planes ? count(cuda::products_of(encoding) * padded(tile_rows_max) * padded(tile_cols_max)) : 0));
    std::int32_t* d_a_sums = pipeline.keep(DeviceArray<std::int32_t>(offset_sums ? count(2 * padded(tile_rows_max)) : 0));
    std::int32_t* d_b_sums = pipeline.keep(DeviceArray<std::int32_t>(offset_sums ? count(2 * padded(tile_cols_max)) : 0));
    // Every (chunk, column tile)'s work units go up once; each row's tiles split at the column
    // tiles' edges (downloaded offsets) when B does not fit one tile.
    const std::vector<std::int64_t> split =
        col_tiles > 1 ? cuda::column_tile_splits(pattern, col_tiles, cols_per_tile, compute) : std::vector<std::int64_t>{};
    std::vector<WorkUnit> units;
    std::vector<std::int64_t> unit_start;  // per (chunk, column tile), then the end
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
        unit_start.push_back(static_cast<std::int64_t>(units.size()));
        for (std::int32_t r = chunk_row[c]; r < chunk_row[c + 1]; ++r) {
          const std::int64_t lo = col_tiles > 1 ? split[r * std::int64_t{col_tiles + 1} + jt] : layout.row_ptr[r];
          const std::int64_t hi = col_tiles > 1 ? split[r * std::int64_t{col_tiles + 1} + jt + 1] : layout.row_ptr[r + 1];
          for (std::int64_t t = lo; t < hi; t += cuda::kThreadsPerUnit)
            units.push_back({t, r, static_cast<std::int32_t>(std::min<std::int64_t>(cuda::kThreadsPerUnit, hi - t))});
        }
      }
    }
    unit_start.push_back(static_cast<std::int64_t>(units.size()));
    const WorkUnit* d_units = pipeline.keep(cuda::upload(units.data(), static_cast<std::int64_t>(units.size()), compute));
    const std::int32_t* d_cols = pattern.d_col.get();
    const auto load_start = std::chrono::steady_clock::now();
    steps_["numeric: dense buffers and units"] += std::chrono::duration<double>(load_start - setup_start).count();
    if (cublas_preload_.valid()) ready_cublas_ = cublas_preload_.get();
    if (!ready_cublas_) ready_cublas_ = std::make_shared<ReadyCublas>();
    CublasHandle& blas = ready_cublas_->handle;
    blas.set_stream(compute);
    // Back on its own stream once the pipeline's streams are gone (the pipeline holds this).
    struct OwnStream {
      std::shared_ptr<ReadyCublas> ready;
      ~OwnStream() {
        try {
          ready->handle.set_stream(ready->stream.get());
        } catch (...) {  // (a destructor; the next numeric phase sets its own stream anyway)
        }
      }
    };
    pipeline.keep_object(std::shared_ptr<OwnStream>(new OwnStream{ready_cublas_}));
    steps_["numeric: load cuBLAS (wait)"] += seconds_since(load_start);
    bool b_expanded = false;

    // The encoding of value 0 for the n real entries of `vectors` plane vectors (-128 in the
    // offset byte planes, 0 in the narrow ones), 0 for their padding (which then adds nothing to
    // the products or the sums).
    const auto clear_planes = [&](std::int8_t* planes_data, std::int64_t vectors) {
      BLOCKMM_CUDA_CHECK(cudaMemsetAsync(planes_data, offset_sums ? 0x80 : 0, count(vectors * k_pitch), compute));
      if (offset_sums && k_pitch > n)
        BLOCKMM_CUDA_CHECK(cudaMemset2DAsync(planes_data + n, count(k_pitch), 0, count(k_pitch - n), count(vectors), compute));
    };
    // One product a plane (the narrow encodings): plane q of the A tile times plane q of the B
    // tile into product q.
    const auto multiply_planes = [&](std::int64_t rows_padded, std::int64_t cols_padded) {
      for (int q = 0; q < plane_count; ++q)
        blas.multiply(static_cast<int>(rows_padded), static_cast<int>(cols_padded), static_cast<int>(k_pitch),
                      d_a8 + q * rows_padded * k_pitch, d_b8 + q * cols_padded * k_pitch,
                      d_c32 + q * rows_padded * cols_padded);
    };

    pipeline.run(chunks, stride, sink, options, report, [&](std::size_t c, std::byte* out) {
      const std::int32_t r0 = chunk_row[c], r1 = chunk_row[c + 1];
      const std::int32_t tile_rows = (r1 - r0) * m;
      const std::int64_t rows_padded = padded(tile_rows);
      const OutputChunk& chunk = chunks[c];
      const std::int64_t a_blocks = a.row_ptr[r1] - a.row_ptr[r0];
      const auto scatter_a = [&](auto tile) {
        if (a_blocks > 0)
          cuda::scatter_a_tile<<<cuda::grid_for(a_blocks * m), 256, 0, compute>>>(
              params.a_row_ptr, params.a_col, params.a_values, m, r0, tile_rows, static_cast<std::int32_t>(a.row_ptr[r0]),
              a_blocks, tile);
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      };
      if (planes) {
        clear_planes(d_a8, plane_count * rows_padded);
        cuda::with_plane_vectors<false>(encoding, d_a8, k_pitch, rows_padded, scatter_a);
        if (offset_sums) {
          cuda::vector_sums<<<static_cast<unsigned int>(2 * rows_padded), 256, 0, compute>>>(d_a8, k_pitch, d_a_sums);
          BLOCKMM_CUDA_CHECK(cudaGetLastError());
        }
      } else {
        BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_a, 0, static_cast<std::size_t>(tile_rows) * n * sizeof(double), compute));
        scatter_a(cuda::Float64Tile{d_a, tile_rows});
      }
      for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
        const std::int64_t u0 = unit_start[c * col_tiles + jt], u1 = unit_start[c * col_tiles + jt + 1];
        if (u0 == u1) continue;  // no output tile of this chunk in these columns
        const std::int32_t j0 = jt * cols_per_tile, j1 = std::min(p, j0 + cols_per_tile);
        const std::int32_t tile_cols = (j1 - j0) * m;
        const std::int64_t cols_padded = padded(tile_cols);
        if (!plan.b_resident || !b_expanded) {
          b_expanded = true;
          const std::int64_t b_entries = b.col_ptr[j1] - b.col_ptr[j0];
          const auto scatter_b = [&](auto tile) {
            if (b_entries > 0)
              cuda::scatter_b_tile<<<cuda::grid_for(b_entries * m), 256, 0, compute>>>(
                  params.b_col_ptr, params.b_csc_row, params.b_csc_block, params.b_values, m, j0, tile_cols,
                  static_cast<std::int32_t>(b.col_ptr[j0]), b_entries, tile);
            BLOCKMM_CUDA_CHECK(cudaGetLastError());
          };
          if (planes) {
            clear_planes(d_b8, plane_count * cols_padded);
            cuda::with_plane_vectors<true>(encoding, d_b8, k_pitch, cols_padded, scatter_b);
            if (offset_sums) {
              cuda::vector_sums<<<static_cast<unsigned int>(2 * cols_padded), 256, 0, compute>>>(d_b8, k_pitch, d_b_sums);
              BLOCKMM_CUDA_CHECK(cudaGetLastError());
            }
          } else {
            BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_b, 0, static_cast<std::size_t>(n) * tile_cols * sizeof(double), compute));
            scatter_b(cuda::Float64Tile{d_b, n});
          }
        }
        const unsigned int grid = static_cast<unsigned int>(u1 - u0);
        const cuda::WorkUnit* chunk_units = d_units + u0;
        const std::int32_t* chunk_cols = d_cols + chunk.first_tile;
        const auto gather = [&](auto product) {
          cuda::gather_records<<<grid, cuda::kThreadsPerUnit, 0, compute>>>(chunk_units, chunk_cols, chunk.first_tile, product,
                                                                          r0, j0, a.row_begin, m, out, params.zero_tiles);
        };
        if (encoding == cuda::DenseEncoding::int8_narrow) {
          multiply_planes(rows_padded, cols_padded);
          gather(cuda::NarrowPlaneProduct{d_c32, rows_padded});
        } else if (encoding == cuda::DenseEncoding::int8_split) {
          multiply_planes(rows_padded, cols_padded);
          gather(cuda::SplitPlanesProduct{d_c32, rows_padded, rows_padded * cols_padded});
        } else if (planes) {
          blas.multiply(static_cast<int>(2 * rows_padded), static_cast<int>(2 * cols_padded), static_cast<int>(k_pitch), d_a8,
                        d_b8, d_c32);
          gather(cuda::Int8PlanesProduct{d_c32, 2 * rows_padded, rows_padded, cols_padded, d_a_sums, d_b_sums, n});
        } else {
          blas.multiply(tile_rows, tile_cols, static_cast<int>(n), d_a, d_b, d_c);
          gather(cuda::Float64Product{d_c, tile_rows});
        }
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      }
    });
  }

  // When the dense path will (likely) run, cuBLAS (0.06-0.08 s to load on the H100 machine) is
  // made ready on a thread of its own (prepare_cublas: loaded, a handle, its GEMM kernel chosen
  // and loaded), beside the build or the symbolic phase, not inside the numeric phase; where the
  // driver started the load beside the context (preload_dense_library), this waits for that
  // load. Once per backend; the future's destructor waits for a preparation in flight.
  void preload_cublas_if_dense(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products) {
    if (cublas_preload_.valid() || ready_cublas_ || !dense_library_needed(n, m, rows, block_products, choices_)) return;
    // The values' largest is not known yet; only float64 against int8 changes the kernels.
    cublas_preload_ = std::async(std::launch::async, prepare_cublas, device_, n, cuda::dense_encoding(n, 0, choices_), budget_);
  }

  // 80% of the device's free memory, shared among the ranks on this GPU.
  std::int64_t free_memory_share() const {
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<std::int64_t>(static_cast<double>(free_bytes) * 0.8 / sharers_);
  }

  int device_;
  int sharers_;
  int threads_;
  std::int64_t budget_;  // explicit device budget (0: a share of the free memory)
  CudaChoices choices_;
  std::string device_name_;
  cuda::StagingBuffers staging_;
  std::map<std::string, double> steps_;
  std::int64_t resident_bytes_ = 0;  // operands built so far
  std::int64_t pattern_bytes_ = 0;
  bool built_on_device_ = true;
  std::shared_ptr<ReadyCublas> ready_cublas_;
  std::future<std::shared_ptr<ReadyCublas>> cublas_preload_;  // last member: destroyed (waited for) first
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

std::string cuda_device_uuid(int device) {
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

void warm_up_cuda(int device, std::int64_t input_bytes, int threads) {
  // The staging slots' host memory is populated (about 6 ms for 64 MiB) while the context starts,
  // and registered (about 2 ms) once it exists: the build's first read no longer waits for both
  // (bench/NOTES.md item 28).
  const std::int64_t staging_bytes = cuda::StagingBuffers::slots_for(input_bytes, threads) * cuda::StagingBuffers::kSlotBytes;
  double populate_seconds = 0;
  std::future<cuda::HugePageMemory> memory = std::async(std::launch::async, [staging_bytes, &populate_seconds] {
    const auto start = std::chrono::steady_clock::now();
    cuda::HugePageMemory populated(static_cast<std::size_t>(staging_bytes));
    populate_seconds = seconds_since(start);
    return populated;
  });
  const auto start = std::chrono::steady_clock::now();
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // (the future's destructor waits for the memory, which goes with it)
  }
  PreparedStaging prepared;
  prepared.steps["setup: context (warm-up)"] = seconds_since(start);
  try {
    const auto wait_start = std::chrono::steady_clock::now();
    cuda::HugePageMemory populated = memory.get();
    prepared.steps["setup: wait for the staging memory"] = seconds_since(wait_start);
    prepared.steps["setup: staging memory populated (beside the context)"] = populate_seconds;
    const auto register_start = std::chrono::steady_clock::now();
    prepared.region = std::make_unique<cuda::RegisteredBuffer>(std::move(populated));
    prepared.steps["setup: staging registered"] = seconds_since(register_start);
    if (prepared.region->get() == nullptr) prepared.region.reset();  // not registered: the backend pins its own
  } catch (...) {  // no memory: the backend pins its own, or says what is wrong
  }
  const std::lock_guard<std::mutex> lock(prepared_staging_lock());
  prepared_staging() = std::move(prepared);
}

void release_cuda_warm_up() { (void)take_prepared_staging(); }

void preload_dense_library(const BackendConfig::WorkEstimate& estimate, const CudaChoices& choices) {
  if (dense_library_needed(estimate.n, estimate.m, estimate.rows, estimate.block_products, choices)) load_cublas();
}

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config) { return std::make_unique<CudaBackend>(config); }

}  // namespace blockmm::kernels
