// Which backend runs this rank, and on which GPU. "auto" takes the GPU only when one is
// visible and the rank's work repays CUDA start-up (bench/NOTES.md has the measurement).
#pragma once

#include <cstdint>
#include <future>
#include <memory>

#include "comm/communicator.hpp"
#include "driver/options.hpp"
#include "kernels/backend.hpp"

namespace blockmm::driver {

// Useful multiply-adds below which "auto" keeps to the CPU.
constexpr std::int64_t kAutoCudaMinMacs = std::int64_t{4} << 30;

// Input bytes above which "auto" starts the CUDA context while the inputs are read.
constexpr std::int64_t kAutoCudaWarmUpInputBytes = std::int64_t{64} << 20;

// Starts CUDA in the background when this run will probably use it; the returned future is
// waited for by choose_backend (empty when nothing was started).
std::shared_future<void> start_cuda_warm_up(const Options& options, const comm::Communicator& comm,
                                            std::int64_t input_bytes);

// `estimate`: the rank's expected work, from the headers before any operand exists (backends
// build their own operands, so the choice comes first). auto takes the GPU for enough
// multiply-adds; the cuda backend uses it to prepare its dense path early.
std::unique_ptr<kernels::Backend> choose_backend(const Options& options, const comm::Communicator& comm, int threads,
                                                 const kernels::BackendConfig::WorkEstimate& estimate);

// One rank's panel from the headers alone: its share of the block-rows, and k_A k_B / p block
// products as if blocks were spread evenly, shared among the ranks.
kernels::BackendConfig::WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks,
                                                         int ranks);

// Useful multiply-adds of an estimate (block products x m^3), saturated at INT64_MAX.
std::int64_t estimated_macs(const kernels::BackendConfig::WorkEstimate& estimate);

}  // namespace blockmm::driver
