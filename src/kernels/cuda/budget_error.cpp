#include "kernels/cuda/budget_error.hpp"

#include <algorithm>
#include <string>

namespace blockmm::kernels::cuda {

OutOfMemoryError budget_error(std::int64_t room, std::int64_t need) {
  return OutOfMemoryError("the cuda backend needs " + std::to_string((need >> 20) + 1) +
                       " MiB of device memory beyond this rank's operands, but the budget leaves " +
                       std::to_string(std::max<std::int64_t>(0, room) >> 20) +
                       " MiB (raise --mem-budget, or use more ranks)");
}

}  // namespace blockmm::kernels::cuda
