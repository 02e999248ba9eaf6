// Which backend runs this rank, and on which GPU. "auto" takes the GPU only when one is
// visible and the rank's work repays CUDA start-up (bench/NOTES.md has the measurement).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"
#include "driver/options.hpp"
#include "kernels/backend.hpp"

namespace blockmm::driver {

// Useful multiply-adds below which "auto" keeps to the CPU.
constexpr std::int64_t kAutoCudaMinMacs = std::int64_t{4} << 30;

std::unique_ptr<kernels::Backend> choose_backend(const Options& options, const comm::Communicator& comm, int threads,
                                                 std::int64_t rank_macs);

}  // namespace blockmm::driver
