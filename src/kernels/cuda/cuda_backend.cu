// The CUDA backend (the Backend interface): device choice, operands built on the device
// (device_build.cu; the host build uploaded where that would not fit the budget, or kept in host
// memory the kernels read where the operand itself would not), the symbolic phase
// (device_symbolic.cu), and the numeric phase's choice between its two paths, the sparse tile
// kernels (sparse_numeric.cu) and the dense tiles on cuBLAS (dense_numeric.cu), both streamed to
// the sink through the chunk pipeline (chunk_pipeline.cu) under a memory budget: what its GPU's
// ledger (device_ledger.hpp) does not hold yet.
#include <cuda_runtime.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/chunk_pipeline.cuh"
#include "kernels/cuda/cublas_session.cuh"
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/dense_numeric.cuh"
#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/device_build.cuh"
#include "kernels/cuda/device_ledger.hpp"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/device_operands.cuh"
#include "kernels/cuda/device_symbolic.cuh"
#include "kernels/cuda/path_choice.hpp"
#include "kernels/cuda/seconds_since.hpp"
#include "kernels/cuda/sparse_numeric.cuh"
#include "kernels/cuda/sparse_plan.hpp"
#include "operands/host_build.hpp"

namespace blockmm::kernels {
namespace {

using cuda::ChunkPipeline;
using cuda::DeviceArray;
using cuda::seconds_since;
using cuda::Stream;

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

// Whether this process's contexts on `device` are an MPS server's, shared with the node's other
// clients: the run's device name says so, since it changes what the start and the end of a run
// cost (a process that finds the GPU already held by a server skips most of the first client's
// start and end) and who else holds the GPU's memory. A driver or toolkit that does not know
// the attribute leaves it unsaid.
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

// The device build's peak for `records` (device_ledger.hpp).
std::int64_t device_build_bytes(const RecordSource& records, const OperandSpec& spec) {
  return cuda::device_build_peak_bytes(records.size(), records.shape().m, spec.row_end - spec.row_begin,
                                       records.shape().block_rows(), spec.role == OperandRole::right);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaConfig& config, cuda::PreparedDevice prepared)
      : device_(config.device),
        sharers_(std::max(1, config.sharers)),
        threads_(config.threads > 0 ? config.threads : omp_get_max_threads()),
        budget_(config.memory_budget),
        choices_(config.choices),
        ledger_(cuda::device_ledger(config.device)),
        attachment_(ledger_),
        cublas_(choices_) {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    BLOCKMM_CUDA_CHECK(cudaFree(nullptr));  // create the context now, not inside the first timed phase
    // Usage is measured from here (the process's first backend on this GPU).
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    ledger_.baseline(static_cast<std::int64_t>(free_bytes));
    if (choices_.probe_memory) ledger_.probe_every_allocation();
    staging_.adopt(std::move(prepared.staging));
    steps_ = prepared.steps;
    cudaDeviceProp prop{};
    BLOCKMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    device_name_ = std::string("GPU ") + std::to_string(device_) + " (" + prop.name +
                   (shared_via_mps(device_) ? ", CUDA MPS" : "") + ")" +
                   (config.name_note.empty() ? "" : " " + config.name_note);
    if (config.estimate.block_products > 0)
      cublas_.prepare_if_dense(device_, config.estimate.n, config.estimate.m, config.estimate.rows,
                               config.estimate.block_products, room());
  }

  std::string name() const override { return "cuda"; }

  BackendTraits traits() const override {
    BackendTraits traits;
    traits.device = true;
    return traits;
  }

  BackendCounters counters() const override {
    BackendCounters counters = counters_;
    observe();
    DeviceMemoryReport& memory = counters.device_memory;
    memory.budget = budget_;
    memory.ledger_peak = ledger_.peak();
    memory.observed_peak = ledger_.observed_peak();
    memory.beyond_arrays_peak = ledger_.beyond_arrays_peak();
    memory.every_allocation = ledger_.probing();
    return counters;
  }
  void begin_product() override {
    counters_ = {};
    steps_ = {};
    in_host_memory_ = false;
    observe();
    ledger_.restart_peaks();
  }

  BackendSteps steps() const override { return steps_; }

  // On the device when its peak fits the memory left (or when asked), else the host build
  // uploaded, or kept in host memory where the spec asks: the same operand every way.
  std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    const bool on_device = !spec.in_host_memory && (choices_.build == CudaChoices::Build::device ||
                                                    (choices_.build == CudaChoices::Build::automatic &&
                                                     device_build_bytes(records, spec) <= room()));
    std::unique_ptr<cuda::DeviceOperand> operand;
    if (on_device) {
      cuda::BuildContext context;
      context.device = device_;
      context.threads = threads_;
      context.staging = &staging_;
      context.read_upload_seconds = &steps_.build_read_upload;
      context.pin_seconds = &steps_.build_pin_staging;
      context.device_seconds = &steps_.build_on_device;
      operand = cuda::build_on_device(records, spec, context, stream.get());
    } else {
      const InputRecords all = records.take();
      const BlockMatrix matrix =
          operands::build_block_matrix(all, spec.row_begin, spec.row_end, spec.role, spec.duplicate_message);
      operand = cuda::upload_host_operand(matrix, spec.role, spec.in_host_memory, stream.get());
    }
    operand->device = device_;
    counters_.bytes_built += records.size() * records.stride();
    built_on_device_ = built_on_device_ && operand->built_on_device;
    in_host_memory_ = in_host_memory_ || operand->in_host_memory;
    observe();
    return operand;
  }

  // A copy of another GPU's operand: every array copied device to device (peer access, enabled
  // by CudaStart where the GPUs allow it, makes that a direct copy over NVLink or PCIe).
  std::unique_ptr<Operand> copy_operand(const Operand& source) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    std::unique_ptr<cuda::DeviceOperand> copy = cuda::copy_device_operand(device_operand(source), device_, stream.get());
    counters_.bytes_from_peers += copy->device_bytes();
    in_host_memory_ = in_host_memory_ || copy->in_host_memory;
    return copy;
  }

  std::int64_t operand_bytes(const RecordSource& records, const OperandSpec& spec) const override {
    if (spec.in_host_memory) return 0;
    return cuda::operand_device_bytes(records.size(), records.shape().m, spec.row_end - spec.row_begin,
                                      records.shape().block_rows(), spec.role == OperandRole::right);
  }

  std::int64_t memory_room() const override { return std::max<std::int64_t>(1, room()); }

  std::int64_t numeric_bytes_at_least(std::int32_t m) const override { return cuda::numeric_minimum_bytes(m); }

  std::int64_t pattern_bytes(std::int64_t tiles, std::int32_t rows) const override {
    return cuda::pattern_device_bytes(tiles, rows);
  }

  // Both whole inputs built on the device (never by the host fallback), when their builds'
  // peaks fit the memory together: B stays resident while A is built.
  bool builds_whole_inputs(const RecordSource& a, const RecordSource& b) const override {
    if (choices_.build == CudaChoices::Build::host) return false;
    if (a.size() > std::int64_t{INT32_MAX} || b.size() > std::int64_t{INT32_MAX}) return false;  // the device build's limit
    const std::int32_t p = a.shape().block_rows();
    return device_build_bytes(a, {0, p, OperandRole::left, {}}) + device_build_bytes(b, {0, p, OperandRole::right, {}}) <=
           room();
  }

  std::vector<std::int64_t> row_products(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    return cuda::device_row_products(device_operand(a), device_operand(b), stream.get());
  }

  std::unique_ptr<Operand> slice_rows(const Operand& a, std::int32_t row_begin, std::int32_t row_end) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    std::unique_ptr<cuda::DeviceOperand> slice = cuda::slice_device_rows(device_operand(a), row_begin, row_end, stream.get());
    slice->device = device_;
    return slice;
  }

  std::int64_t block_products(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    const cuda::DeviceOperand& a_operand = device_operand(a);
    const std::int64_t products = cuda::device_block_products(a_operand, device_operand(b), stream.get());
    cublas_.prepare_if_dense(device_, a_operand.shape.n, a_operand.shape.m, a_operand.rows_held(), products, room());
    return products;
  }

  std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) override {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device_));
    Stream stream;
    // Scratch for one batch of rows: a quarter of the room beside the phase's other arrays and
    // their last pages (at least 1 MiB; a row that needs more is a batch alone).
    const std::int64_t batch_bytes =
        choices_.symbolic_batch_bytes > 0
            ? choices_.symbolic_batch_bytes
            : std::max<std::int64_t>(cuda::kMiB, (room() - cuda::page_slack(cuda::kSymbolicBuffers)) / 4);
    auto pattern = cuda::device_symbolic(device_operand(a), device_operand(b), batch_bytes, stream.get());
    observe();
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
    report.device = device_name_ + (built_on_device_ ? "" : ", operands built on the host") +
                    (in_host_memory_ ? ", A read from host memory" : "");
    if (pattern.tiles() == 0) return report;
    const int m = a.shape.m;

    // Room for everything its GPU's ledger does not hold yet (the operands, patterns, cuBLAS's
    // workspace, the reserve): an explicit budget less that, or a share of the memory still free.
    cublas_.settle();
    const std::int64_t room = this->room();
    if (room <= 0)  // a memory refusal, by type (MemoryError in Python)
      throw OutOfMemoryError("the cuda backend holds " + std::to_string((ledger_.held() >> 20) + 1) +
                          " MiB of device memory for this rank's operands and patterns and CUDA's own, as much as "
                          "the budget of " +
                          std::to_string(budget_ >> 20) + " MiB (raise --mem-budget, or run on more GPUs: they split B)");

    // Copy-back through the staging slots (pinned for the build; pinned here if it ran on the host).
    const auto pin_start = std::chrono::steady_clock::now();
    staging_.reserve(cuda::StagingBuffers::kCopyBackSlots);
    steps_.numeric_pin_copy_back.add(seconds_since(pin_start));
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
    problem.chunk_bytes = options.chunk_bytes;
    problem.record_bytes = record_bytes<std::uint32_t>(m);
    // The path: the faster predicted one (path_choice.hpp), unless the choices force one. The
    // dense prediction needs the encoding, and so the operands' largest value (one pass).
    // The sparse kernel: block products on tensor cores where asked for, m allows, the device
    // has them (sm_80) and B's byte planes fit the room.
    int major = 0;
    BLOCKMM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
    const cuda::RightOperandCounts b_counts{b.blocks(), b.shape.block_rows()};
    // Each path's plan fills its room with its buffers' exact sizes: the pages they round up to
    // are kept out of it.
    const std::int64_t sparse_room = room - cuda::page_slack(cuda::kSparsePathBuffers);
    const cuda::SparseKernel wanted =
        cuda::sparse_kernel_for(m, choices_.generic_kernel, choices_.tensor_core_blocks && major >= 8);
    const cuda::SparseKernel kernel = cuda::fitting_sparse_kernel(wanted, pattern.layout(), m, sparse_room, b_counts);
    cuda::PathProblem path = cuda::path_problem(a.shape.n, m, pattern.layout().row_ptr, a.row_ptr.data(), b.blocks(),
                                                pattern.block_products);
    const bool dense_possible = a.shape.n < cuda::kDenseMaxOrder && choices_.dense != CudaChoices::Dense::never;
    problem.largest_value = dense_possible ? cuda::operands_largest_value(a, b, pipeline.compute()) : 0;
    const cuda::DenseEncoding encoding = cuda::dense_encoding(a.shape.n, problem.largest_value, choices_);
    path.dense_products = encoding == cuda::DenseEncoding::float64 ? 0 : cuda::products_of(encoding);
    const cuda::PathChoice choice = cuda::choose_path(path, kernel, choices_);
    steps_.predicted_sparse.add(choice.predicted.sparse_seconds);
    steps_.predicted_dense.add(choice.predicted.dense_seconds);
    // A dense path that was only predicted faster gives way to the sparse one where the room
    // cannot hold its smallest tiles.
    std::optional<cuda::DensePlan> dense_plan;
    if (choice.dense) {
      // The room beside cuBLAS's handle and workspace, made where the plan fits.
      problem.room = room - cublas_.bytes_to_make_ready(room) - cuda::page_slack(cuda::kDensePathBuffers);
      try {
        dense_plan = cuda::plan_dense(problem, encoding, pattern.layout().row_ptr);
      } catch (const ResourceError&) {
        if (choice.forced) throw;
      }
      if (dense_plan) cublas_.make_ready(room);
    }
    if (dense_plan) {
      const cuda::DensePlan& plan = *dense_plan;
      steps_.numeric_to_dense_plan.add(seconds_since(numeric_start));
      report.device += std::string(", ") + cuda::describe(encoding);
      if (plan.k_pieces > 1) report.device += ", K in " + std::to_string(plan.k_pieces) + " pieces";
      report.device += " (" + cuda::describe(choice.predicted) + ")";
      cuda::numeric_dense(a, b, pattern, plan, params, cublas_, sink, options, pipeline, report, steps_);
    } else {
      const cuda::SparsePlan plan = cuda::plan_sparse(pattern.layout(), m, kernel, sparse_room, options.chunk_bytes, b_counts);
      report.device += std::string(kernel.tensor_cores ? ", sparse tensor-core blocks (" : ", sparse tile kernels (") +
                       cuda::describe(choice.predicted) + ")";
      cuda::numeric_sparse(pattern, plan, params, sink, options, pipeline, report);
    }

    steps_.numeric_first_issue.add(pipeline.timeline().first_issue);
    steps_.numeric_last_drain.add(pipeline.timeline().last_drain);
    steps_.numeric_device_span.add(pipeline.timeline().device_span);
    unsigned int zero_count = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(&zero_count, zero_tiles, sizeof zero_count, cudaMemcpyDeviceToHost, pipeline.compute()));
    BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(pipeline.compute()));
    if (zero_count != 0)
      throw Error(ExitCode::other, "internal error: the CUDA numeric phase produced " + std::to_string(zero_count) +
                                       " all-zero tiles that the symbolic phase kept");
    observe();
    return report;
  }

 private:
  // What it may still allocate: an explicit budget less what its GPU's ledger holds, or a share
  // of the free memory.
  std::int64_t room() const { return budget_ > 0 ? budget_ - ledger_.held() : free_memory_share(); }

  // The GPU's free memory sampled into the ledger, at the end of a phase (cheap: a few a product).
  void observe() const { cuda::observe_device_memory(device_); }

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
  cuda::DeviceLedger& ledger_;  // its GPU's (shared with the process's other backends there)
  cuda::LedgerAttachment attachment_;
  std::string device_name_;
  cuda::StagingBuffers staging_;
  BackendSteps steps_;
  bool built_on_device_ = true;
  bool in_host_memory_ = false;  // an operand of its product is read from host memory
  BackendCounters counters_;
  cuda::CublasSession cublas_;  // last member: destroyed (its preparation in flight waited for) first
};

}  // namespace

}  // namespace blockmm::kernels

namespace blockmm::kernels::cuda {

std::unique_ptr<Backend> make_cuda_backend(const CudaConfig& config, PreparedDevice prepared) {
  return std::make_unique<CudaBackend>(config, std::move(prepared));
}

}  // namespace blockmm::kernels::cuda
