// Seconds from a steady-clock instant to now: the cuda backend's steps (--stats) and the chunk
// pipeline's timeline use this one clock.
#pragma once

#include <chrono>

namespace blockmm::kernels::cuda {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace blockmm::kernels::cuda
