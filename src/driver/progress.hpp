// Progress on a terminal for runs over a second: phase, percent and rate, redrawn in place on
// stderr by rank 0. Silent when stderr is not a terminal or with --quiet.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "driver/run_stats.hpp"

namespace blockmm::driver {

class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  void phase(const std::string& name);
  // Numeric progress: `done` of `total` tiles; `macs_done` useful multiply-adds so far.
  void advance(std::int64_t done, std::int64_t total, double macs_done);
  void finish();

 private:
  void draw(const std::string& line);
  bool enabled_;
  bool drawn_ = false;
  std::mutex mutex_;
  Stopwatch run_;
  Stopwatch phase_clock_;
  double last_draw_ = -1;
  std::string phase_;
};

}  // namespace blockmm::driver
