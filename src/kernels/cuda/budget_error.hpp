// The one error both numeric paths' plans raise when the device memory left beyond the operands
// cannot hold their smallest workable buffers. Pure C++ (the plans are unit-tested without a GPU).
#pragma once

#include <cstdint>

#include "core/error.hpp"

namespace blockmm::kernels::cuda {

// The error for a budget whose `room` (beyond the operands) is below the `need` of the smallest
// workable buffers: names both and what to change. A memory refusal (MemoryError in Python).
OutOfMemoryError budget_error(std::int64_t room, std::int64_t need);

}  // namespace blockmm::kernels::cuda
