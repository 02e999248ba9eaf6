// What every probe in bench/device needs: a clock and a CUDA return-code check that stops the
// probe with the call's name. Header-only, so each probe stays one nvcc line.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace probe {

inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A clock that prints, at each lap, what was timed and the seconds since the last lap.
class Laps {
 public:
  explicit Laps(int width = 36) : width_(width), last_(now()) {}
  void operator()(const char* what) {
    const double n = now();
    std::printf("  %-*s %7.4f s\n", width_, what, n - last_);
    last_ = n;
  }

 private:
  int width_;
  double last_;
};

inline void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

}  // namespace probe
