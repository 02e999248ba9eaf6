// The progress display of rank 0 on stderr: phase, percent, rate, elapsed time and ETA.
// Two styles: a bar redrawn in place on one line of a terminal (never wider than the
// terminal, so it never wraps), or plain lines every few seconds for logs, pipes and mpirun.
// A ticker thread redraws it, so elapsed time and the backends' tile counter (bumped from
// their own loops) move between the driver's calls. Hand-written: see README "Progress".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/stopwatch.hpp"
#include "driver/options.hpp"
#include "driver/run_stats.hpp"

namespace blockmm::driver {

enum class ProgressStyle { bar, lines, none };

struct ProgressConfig {
  ProgressStyle style = ProgressStyle::none;
  bool escapes = false;          // bar: erase to end of line with ESC[K (else pad with spaces)
  double interval = 5.0;         // lines: seconds between lines; also the delay before the first
  double bar_delay = 1.0;        // bar: runs shorter than this show nothing
  std::string scope;             // appended to counted phases, e.g. "rank 0 of 4"
  int columns_setting = 0;       // COLUMNS where stderr is no terminal that says (0: unset)
};

// What --progress=auto means for this process: a bar when stderr is a terminal that takes
// escape codes (TERM set and not "dumb"), plain lines otherwise (pipes, logs, mpirun, srun);
// lines every settings.progress_interval seconds.
ProgressConfig progress_config_for_stderr(ProgressRequest requested, const settings::Settings& settings);

// Terminal columns of stderr (TIOCGWINSZ), else `columns_setting` (COLUMNS; 0: unset), else 80.
int stderr_columns(int columns_setting = 0);

// One line of the display for `columns` columns (0: no limit). Exposed for unit tests.
struct ProgressSnapshot {
  std::string phase;
  std::string scope;
  double phase_seconds = 0;
  double run_seconds = 0;
  std::int64_t done = -1;  // -1: the phase counts nothing
  std::int64_t total = 0;
  double work_per_unit = 0;  // multiply-adds per tile, for the rate
};
std::string format_progress_line(const ProgressSnapshot& snapshot, int columns, bool bar);

// "0:07", "12:34", "1:02:03".
std::string format_duration(double seconds);

class Progress {
 public:
  explicit Progress(ProgressConfig config);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A new phase without a count.
  void phase(const std::string& name);
  // A new phase counting `total` tiles of `work_per_unit` multiply-adds each.
  void counted_phase(const std::string& name, std::int64_t total, double work_per_unit);
  // Tiles done in the counted phase; backends add to it from any thread.
  std::atomic<std::int64_t>& counter() { return done_; }
  // Raises the count to at least `done` (a backend's per-chunk report).
  void at_least(std::int64_t done);
  // Stops the ticker and clears the bar, or prints the closing line (lines style).
  void finish();

 private:
  void tick_loop();
  void draw_locked();
  ProgressSnapshot snapshot_locked() const;

  ProgressConfig config_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool finished_ = false;
  bool shown_ = false;          // anything printed yet
  std::size_t bar_width_ = 0;   // characters of the bar currently on screen
  Stopwatch run_;
  Stopwatch phase_clock_;
  std::string phase_;
  std::int64_t total_ = -1;
  double work_per_unit_ = 0;
  std::atomic<std::int64_t> done_{0};
  std::thread ticker_;
};

}  // namespace blockmm::driver
