#include "kernels/cuda/cublas_session.cuh"

#include <array>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device_ledger.hpp"
#include "kernels/cuda/path_choice.hpp"

namespace blockmm::kernels::cuda {
namespace {

// The warm-up product's operands and result (element types by the encoding), allocated before the
// preparation's thread starts.
struct WarmUpOperands {
  WarmUpProduct product;
  std::array<DeviceArray<std::byte>, 3> arrays;  // A, B, C
};

std::shared_ptr<ReadyCublas> prepare_cublas(int device, std::shared_ptr<const WarmUpOperands> warm,
                                            std::shared_ptr<DeviceArray<std::byte>> workspace) {
  try {
    BLOCKMM_CUDA_CHECK(cudaSetDevice(device));
    auto ready = std::make_shared<ReadyCublas>(std::move(*workspace));
    if (warm == nullptr || warm->product.rows == 0) return ready;
    const WarmUpProduct& product = warm->product;
    const auto issue = [&](auto in, auto out) {
      using In = decltype(in);
      using Out = decltype(out);
      ready->handle.multiply(product.rows, product.cols, product.k, reinterpret_cast<const In*>(warm->arrays[0].get()),
                             reinterpret_cast<const In*>(warm->arrays[1].get()), reinterpret_cast<Out*>(warm->arrays[2].get()));
      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(ready->stream.get()));
    };
    if (product.float64)
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

void CublasSession::prepare_if_dense(int device, std::int64_t n, std::int32_t m, std::int32_t rows,
                                     std::int64_t block_products, std::int64_t room) {
  if (preload_.valid() || ready_ || !dense_library_needed(n, m, rows, block_products, choices_)) return;
  if (room < kEarlyCublasRoom) return;
  try {
    std::size_t free_bytes = 0, total_bytes = 0;
    BLOCKMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    // The values' largest is not known yet; only float64 against int8 changes the kernels.
    auto warm = std::make_shared<WarmUpOperands>();
    warm->product = warm_up_product(n, dense_encoding(n, 0, choices_), static_cast<std::int64_t>(free_bytes), room);
    const WarmUpProduct& product = warm->product;
    if (product.rows > 0) {
      const std::int64_t in = product.float64 ? 8 : 1, out = product.float64 ? 8 : 4;
      const std::int64_t sizes[3] = {in * product.rows * product.k, in * product.cols * product.k,
                                     out * std::int64_t{product.rows} * product.cols};
      for (int i = 0; i < 3; ++i) warm->arrays[static_cast<std::size_t>(i)] = DeviceArray<std::byte>(static_cast<std::size_t>(sizes[i]));
    }
    auto workspace = std::make_shared<DeviceArray<std::byte>>(static_cast<std::size_t>(cublas_workspace_bytes(room)));
    warm_up_operands_ = warm;
    preload_ = std::async(std::launch::async, prepare_cublas, device, warm, std::move(workspace));
  } catch (...) {  // no room or no memory now: the numeric phase makes its handle where it needs one
    warm_up_operands_.reset();
  }
}

void CublasSession::settle() {
  if (preload_.valid()) ready_ = preload_.get();
  warm_up_operands_.reset();
}

std::int64_t CublasSession::bytes_to_make_ready(std::int64_t room) const {
  return ready_ || preload_.valid() ? 0 : allocation_footprint(cublas_workspace_bytes(room));
}

void CublasSession::make_ready(std::int64_t room) {
  settle();
  if (!ready_) ready_ = std::make_shared<ReadyCublas>(DeviceArray<std::byte>(static_cast<std::size_t>(cublas_workspace_bytes(room))));
}

CublasHandle& CublasSession::attach(ChunkPipeline& pipeline) {
  settle();
  if (!ready_) ready_ = std::make_shared<ReadyCublas>(DeviceArray<std::byte>(static_cast<std::size_t>(cublas_workspace_bytes(0))));
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
