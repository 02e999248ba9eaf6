#include "kernels/cuda/cublas_session.cuh"

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/path_choice.hpp"

namespace blockmm::kernels::cuda {
namespace {

std::shared_ptr<ReadyCublas> prepare_cublas(int device, std::int64_t n, DenseEncoding encoding, std::int64_t budget) {
  try {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device));
    auto ready = std::make_shared<ReadyCublas>();
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const WarmUpProduct warm = warm_up_product(n, encoding, static_cast<std::int64_t>(free_bytes), budget);
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

}  // namespace

bool dense_library_needed(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products,
                          const CudaChoices& choices) {
  if (block_products <= 0) return false;
  const PathProblem estimate = estimated_path_problem(n, m, rows, block_products);
  return choose_path(estimate, sparse_kernel_for(m, choices.generic_kernel, choices.tensor_core_blocks), choices).dense;
}

void load_cublas() {
  try {
    (void)CublasLibrary::get();  // a load in flight on another thread is waited for
  } catch (...) {  // the numeric phase reports it, where it needs the library
  }
}

void CublasSession::prepare_if_dense(int device, std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products) {
  if (preload_.valid() || ready_ || !dense_library_needed(n, m, rows, block_products, choices_)) return;
  // The values' largest is not known yet; only float64 against int8 changes the kernels.
  preload_ = std::async(std::launch::async, prepare_cublas, device, n, dense_encoding(n, 0, choices_), budget_);
}

CublasHandle& CublasSession::attach(ChunkPipeline& pipeline) {
  if (preload_.valid()) ready_ = preload_.get();
  if (!ready_) ready_ = std::make_shared<ReadyCublas>();
  ready_->handle.set_stream(pipeline.compute());
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
  pipeline.keep_object(std::shared_ptr<OwnStream>(new OwnStream{ready_}));
  return ready_->handle;
}

}  // namespace blockmm::kernels::cuda
