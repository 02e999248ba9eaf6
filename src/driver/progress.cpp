#include "driver/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "driver/run_stats.hpp"

namespace blockmm::driver {
namespace {

std::string percent_text(std::int64_t done, std::int64_t total) {
  const double pct = total > 0 ? 100.0 * static_cast<double>(std::min(done, total)) / static_cast<double>(total) : 100.0;
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", pct);
  return text;
}

std::string rate_text(double macs_per_second) {
  char text[32];
  if (macs_per_second >= 1e12) std::snprintf(text, sizeof text, "%.2f TMAC/s", macs_per_second / 1e12);
  else if (macs_per_second >= 1e9) std::snprintf(text, sizeof text, "%.2f GMAC/s", macs_per_second / 1e9);
  else std::snprintf(text, sizeof text, "%.1f MMAC/s", macs_per_second / 1e6);
  return text;
}

std::string bar_text(std::int64_t done, std::int64_t total, std::size_t width) {
  const std::size_t inner = width - 2;
  const double fraction = total > 0 ? static_cast<double>(std::min(done, total)) / static_cast<double>(total) : 1.0;
  const auto filled = static_cast<std::size_t>(fraction * static_cast<double>(inner));
  return "[" + std::string(filled, '#') + std::string(inner - filled, '-') + "]";
}

// Fills the "\x01" placeholder of `pattern` with a bar of the width left over, or drops it.
std::string with_bar(const std::string& pattern, std::size_t width, std::int64_t done, std::int64_t total) {
  const std::size_t at = pattern.find('\x01');
  if (at == std::string::npos) return pattern;
  const std::size_t rest = pattern.size() - 1;
  constexpr std::size_t kMinBar = 12;
  constexpr std::size_t kMaxBar = 42;
  if (width == 0 || rest + kMinBar > width) {
    std::string plain = pattern;
    plain.erase(at, 1);
    // The placeholder sits between two spaces: keep one.
    if (at > 0 && at < plain.size() && plain[at - 1] == ' ' && plain[at] == ' ') plain.erase(at, 1);
    return plain;
  }
  return pattern.substr(0, at) + bar_text(done, total, std::min(kMaxBar, width - rest)) + pattern.substr(at + 1);
}

}  // namespace

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, std::floor(seconds)));
  char text[32];
  if (s >= 3600) std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  return text;
}

std::string format_progress_line(const ProgressSnapshot& s, int columns, bool bar) {
  // The last column stays free: some terminals wrap as soon as it is written.
  const std::size_t width = columns > 1 ? static_cast<std::size_t>(columns - 1) : 0;
  const std::string elapsed = format_duration(s.run_seconds);
  std::vector<std::string> candidates;
  if (s.done < 0) {
    candidates = {"blockmm: " + s.phase + ", elapsed " + elapsed, s.phase + ", elapsed " + elapsed,
                  s.phase + " " + elapsed};
  } else {
    const std::string pct = percent_text(s.done, s.total);
    const double macs = s.work_per_unit * static_cast<double>(s.done);
    const std::string rate = s.phase_seconds > 0 && s.done > 0 ? rate_text(macs / s.phase_seconds) : "";
    std::string eta;
    if (s.done > 0 && s.done < s.total && s.phase_seconds > 0)
      eta = format_duration(s.phase_seconds * static_cast<double>(s.total - s.done) / static_cast<double>(s.done));
    else if (s.done >= s.total)
      eta = "0:00";
    const std::string eta_part = eta.empty() ? "" : ", ETA " + eta;
    const std::string rate_part = rate.empty() ? "" : ", " + rate;
    const std::string scope_part = s.scope.empty() ? "" : ", " + s.scope;
    if (!bar) {
      candidates = {"blockmm: " + s.phase + " " + pct + " (" + with_thousands(s.done) + " of " +
                    with_thousands(s.total) + " tiles" + scope_part + ")" + rate_part + ", elapsed " + elapsed +
                    eta_part};
    } else {
      const std::string marker(1, '\x01');
      const std::string short_eta = eta.empty() ? "" : " ETA " + eta;
      const std::string short_rate = rate.empty() ? "" : " " + rate;
      candidates = {
          "blockmm: " + s.phase + " " + pct + " " + marker + " " + rate + (rate.empty() ? "" : ", ") + "elapsed " +
              elapsed + eta_part,
          s.phase + " " + pct + " " + marker + short_rate + " " + elapsed + short_eta,
          s.phase + " " + pct + short_rate + " " + elapsed + short_eta,
          s.phase + " " + pct + " " + elapsed + short_eta,
          s.phase + " " + pct + short_eta,
          pct + short_eta,
      };
    }
  }
  std::string chosen;
  for (const std::string& pattern : candidates) {
    chosen = bar ? with_bar(pattern, width, s.done, s.total) : pattern;
    if (width == 0 || chosen.size() <= width) return chosen;
  }
  return width == 0 ? chosen : chosen.substr(0, width);
}

int stderr_columns(int columns_setting) {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return columns_setting > 0 ? columns_setting : 80;
}

ProgressConfig progress_config_for_stderr(ProgressRequest requested, const settings::Settings& settings) {
  ProgressConfig config;
  config.interval = settings.progress_interval > 0 ? settings.progress_interval : 5.0;
  config.bar_delay = std::min(1.0, config.interval);
  config.columns_setting = settings.columns;
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  config.escapes = terminal && !settings.terminal.empty() && settings.terminal != "dumb";
  if (requested == ProgressRequest::none) config.style = ProgressStyle::none;
  else if (requested == ProgressRequest::bar) config.style = ProgressStyle::bar;
  else if (requested == ProgressRequest::lines) config.style = ProgressStyle::lines;
  else config.style = config.escapes ? ProgressStyle::bar : ProgressStyle::lines;
  return config;
}

Progress::Progress(ProgressConfig config) : config_(std::move(config)) {
  if (config_.style != ProgressStyle::none) ticker_ = std::thread([this] { tick_loop(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  // On the way out of a failed run: clear the bar so that the error line stands alone.
  if (bar_width_ > 0) {
    std::fputs(config_.escapes ? "\r\033[K" : ("\r" + std::string(bar_width_, ' ') + "\r").c_str(), stderr);
    std::fflush(stderr);
  }
}

void Progress::phase(const std::string& name) { counted_phase(name, -1, 0); }

void Progress::counted_phase(const std::string& name, std::int64_t total, double work_per_unit) {
  if (config_.style == ProgressStyle::none) return;
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = name;
  total_ = total;
  work_per_unit_ = work_per_unit;
  done_.store(0, std::memory_order_relaxed);
  phase_clock_.lap();
  draw_locked();
}

void Progress::at_least(std::int64_t done) {
  std::int64_t now = done_.load(std::memory_order_relaxed);
  while (now < done && !done_.compare_exchange_weak(now, done, std::memory_order_relaxed)) {
  }
}

void Progress::finish() {
  if (config_.style == ProgressStyle::none) return;
  std::unique_lock<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  stopping_ = true;
  lock.unlock();
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  lock.lock();
  if (config_.style == ProgressStyle::lines && shown_) {
    std::fprintf(stderr, "blockmm: done, elapsed %s\n", format_duration(run_.seconds()).c_str());
    std::fflush(stderr);
  }
  if (bar_width_ > 0) {
    std::fputs(config_.escapes ? "\r\033[K" : ("\r" + std::string(bar_width_, ' ') + "\r").c_str(), stderr);
    std::fflush(stderr);
    bar_width_ = 0;
  }
}

ProgressSnapshot Progress::snapshot_locked() const {
  ProgressSnapshot s;
  s.phase = phase_;
  s.phase_seconds = phase_clock_.seconds();
  s.run_seconds = run_.seconds();
  if (total_ >= 0) {
    s.total = total_;
    s.done = std::min(done_.load(std::memory_order_relaxed), total_);
    s.work_per_unit = work_per_unit_;
    s.scope = config_.scope;
  }
  return s;
}

void Progress::draw_locked() {
  if (stopping_ || phase_.empty()) return;
  const double now = run_.seconds();
  if (config_.style == ProgressStyle::lines) {
    // Short runs print nothing; long ones a line at each phase change and every interval.
    if (now < config_.interval) return;
    const std::string line = format_progress_line(snapshot_locked(), 0, false) + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = true;
    return;
  }
  if (now < config_.bar_delay) return;
  const std::string line = format_progress_line(snapshot_locked(), stderr_columns(config_.columns_setting), true);
  std::string frame = "\r" + line;
  if (config_.escapes) frame += "\033[K";
  else if (line.size() < bar_width_) frame += std::string(std::min(bar_width_, line.size() + 512) - line.size(), ' ');
  std::fputs(frame.c_str(), stderr);
  std::fflush(stderr);
  bar_width_ = std::max(line.size(), config_.escapes ? line.size() : bar_width_);
  shown_ = true;
}

void Progress::tick_loop() {
  const auto period =
      std::chrono::duration<double>(config_.style == ProgressStyle::bar ? std::min(0.1, config_.interval) : config_.interval);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, period, [this] { return stopping_; })) break;
    draw_locked();
  }
}

}  // namespace blockmm::driver
