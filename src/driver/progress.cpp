#include "driver/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace blockmm::driver {

Progress::Progress(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::phase(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = name;
  phase_clock_.lap();
  if (enabled_ && run_.seconds() >= 1.0) draw("[blockmm] " + name + " ...");
}

void Progress::advance(std::int64_t done, std::int64_t total, double macs_done) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = run_.seconds();
  if (!enabled_ || now < 1.0 || now - last_draw_ < 0.25) return;
  const double elapsed = phase_clock_.seconds();
  char line[160];
  std::snprintf(line, sizeof line, "[blockmm] %s %5.1f%% (%lld of %lld blocks), %.2f GMAC/s", phase_.c_str(),
                total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                static_cast<long long>(done), static_cast<long long>(total),
                elapsed > 0 ? macs_done / elapsed / 1e9 : 0.0);
  draw(line);
}

void Progress::draw(const std::string& line) {
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
  last_draw_ = run_.seconds();
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace blockmm::driver
