#include "console/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "console/run_stats.hpp"
#include "core/error.hpp"

namespace blockmm::console {
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

// One argument as a shell would need it: plain when safe, else in single quotes.
std::string shell_word(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                           "0123456789-_=+./,:@%") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string plural(long long count, const char* one, const char* many) {
  return with_thousands(count) + " " + (count == 1 ? one : many);
}

// "12.3 MB": decimal units, as --stats writes them.
std::string size_text(std::int64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e12) std::snprintf(text, sizeof text, "%.2f TB", b / 1e12);
  else if (b >= 1e9) std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
  else return with_thousands(bytes) + " B";
  return text;
}

}  // namespace

std::string local_time_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  if (::localtime_r(&now, &local) == nullptr) return utc_now_iso8601();
  char text[40];
  if (std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local) == 0) return utc_now_iso8601();
  std::string stamp = text;  // "...+0100": ISO 8601's extended form puts a colon in the offset
  if (stamp.size() >= 5) stamp.insert(stamp.size() - 2, ":");
  return stamp;
}

std::string log_header_line(const RunHeader& h) {
  std::string line = h.version + " on " + (h.host.empty() ? std::string("?") : h.host) + ": " +
                     plural(h.ranks, "rank", "ranks") + " x " + plural(h.threads, "thread", "threads");
  std::string command;
  for (const std::string& arg : h.command_line) command += (command.empty() ? "" : " ") + shell_word(arg);
  if (!command.empty()) line += ": " + command;
  return escape_control_characters(line);
}

std::string written_summary(const std::string& path, const std::string& format, std::int64_t blocks,
                            std::int64_t bytes, double seconds) {
  char time_text[32];
  std::snprintf(time_text, sizeof time_text, "%.2f s", seconds);
  return escape_control_characters("wrote " + path + " (" + format + "): " + plural(blocks, "block", "blocks") + ", " +
                                   size_text(bytes) + " in " + time_text);
}

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

void Progress::set_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  backend_ = name;
}

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

void Progress::finish(const std::string& summary) {
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
    // A log's run ends by saying which backend ran and what was written, however short it was.
    const std::string line = local_time_iso8601() + " blockmm: done, elapsed " + format_duration(run_.seconds()) +
                             (backend_.empty() ? "" : ", " + backend_ + " backend") +
                             (summary.empty() ? "" : ": " + summary) + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  if (bar_width_ > 0) {
    std::fputs(config_.escapes ? "\r\033[K" : ("\r" + std::string(bar_width_, ' ') + "\r").c_str(), stderr);
    bar_width_ = 0;
  }
  // On a terminal every run ends with one line, however short it was.
  if (config_.style == ProgressStyle::bar && !summary.empty()) std::fputs(("blockmm: " + summary + "\n").c_str(), stderr);
  std::fflush(stderr);
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
    // The header at the start (a log says what ran and when, however short the run: the backend
    // is not chosen yet, the closing line names it); then, once the run has taken an interval,
    // a line at each phase change and every interval.
    if (shown_ && now < config_.interval) return;
    const std::string stamp = local_time_iso8601() + " ";
    std::string text;
    if (!shown_) text = stamp + "blockmm: " + log_header_line(config_.header) + "\n";
    if (now >= config_.interval) text += stamp + format_progress_line(snapshot_locked(), 0, false) + "\n";
    std::fputs(text.c_str(), stderr);
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

}  // namespace blockmm::console
