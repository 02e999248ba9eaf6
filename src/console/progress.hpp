// console: what a run shows its user on the way and at the end: the progress display (this
// file) and the --stats text and JSON (run_stats.hpp). It only formats and prints what the
// driver hands it (phases, tile counts, the run's report); how the product runs is decided elsewhere.
//
// The progress display of rank 0 on stderr: phase, percent, rate, elapsed time and ETA.
// Two styles: a bar redrawn in place on one line of a terminal (never wider than the
// terminal, so it never wraps), or plain lines every few seconds for logs, pipes and mpirun.
// A ticker thread redraws it, so elapsed time and the backends' tile counter (bumped from
// their own loops) move between the driver's calls. Log lines carry the local time (ISO 8601);
// the first, printed as the run starts, is a header naming the version, host, ranks x threads
// and the command, and every run ends with one line naming the backend and saying what was
// written, how big, in how long (a terminal's short run shows that line alone). Hand-written:
// see docs/running.md, "Progress".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "console/run_stats.hpp"
#include "core/stopwatch.hpp"
#include "settings/settings.hpp"

namespace blockmm::console {

// What --progress asked for (driver/options.hpp); automatic: decided by stderr
// (progress_config_for_stderr).
enum class ProgressRequest { automatic, bar, lines, none };

enum class ProgressStyle { bar, lines, none };

// What the first line of a log names: blockmm's version, the host, the ranks and the threads
// (or GPUs) of each, and the command line.
struct RunHeader {
  std::string version;                    // "blockmm 0.1.0 (commit ...)"
  std::string host;
  int ranks = 1;
  int threads = 1;
  std::vector<std::string> command_line;  // argv
};

// "blockmm 0.1.0 (commit ...) on node01: 4 ranks x 8 threads: blockmm A.bin B.bin C.bin".
// Arguments holding spaces or quotes are quoted for a shell, control characters written as \xHH.
std::string log_header_line(const RunHeader& header);

// The run's last line: "wrote C.bin (binary): 48,962 blocks, 50.5 MB in 0.40 s".
std::string written_summary(const std::string& path, const std::string& format, std::int64_t blocks,
                            std::int64_t bytes, double seconds);

// The local time, ISO 8601 to the second with the UTC offset: "2026-11-24T23:00:57+01:00".
std::string local_time_iso8601();

struct ProgressConfig {
  ProgressStyle style = ProgressStyle::none;
  bool escapes = false;          // bar: erase to end of line with ESC[K (else pad with spaces)
  double interval = 5.0;         // lines: seconds between lines; also the delay before the first
  double bar_delay = 1.0;        // bar: runs shorter than this show nothing
  std::string scope;             // appended to counted phases, e.g. "rank 0 of 4"
  int columns_setting = 0;       // COLUMNS where stderr is no terminal that says (0: unset)
  RunHeader header;              // lines: what the first line says (log_header_line)
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
  // The backend that runs, for the log's closing line.
  void set_backend(const std::string& name);
  // Stops the ticker and clears the bar; then prints `summary` (written_summary): after a bar
  // as one line, in a log as the closing "done" line with the backend.
  void finish(const std::string& summary = "");

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
  std::string backend_;         // for the log's closing line
  std::size_t bar_width_ = 0;   // characters of the bar currently on screen
  Stopwatch run_;
  Stopwatch phase_clock_;
  std::string phase_;
  std::int64_t total_ = -1;
  double work_per_unit_ = 0;
  std::atomic<std::int64_t> done_{0};
  std::thread ticker_;
};

}  // namespace blockmm::console
