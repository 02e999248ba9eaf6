// The phases of a distributed product and the side channel through which the caller sees them:
// a PhaseScope times a phase into the run's PhaseTimes and tells the Observer (a progress
// display) that it began, so that the product's code carries no timers or display calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/stopwatch.hpp"

namespace blockmm::multiply {

enum class Phase { read, exchange, build, setup, symbolic, numeric, commit };

// Seconds of one rank's phases.
struct PhaseTimes {
  double read = 0;             // inspect and read this rank's share of A and B
  double exchange = 0;         // work estimate, ranges, block exchange
  double build = 0;            // operands (CSR / CSC) where they are computed
  double setup = 0;            // the backends' start (a GPU's context, unless it overlapped the reading)
  double symbolic = 0;
  double numeric = 0;          // numeric phase including the overlapped writes
  double numeric_compute = 0;  // of which the kernels were busy (device time for cuda)
  double write = 0;            // time inside the writer (overlapped with numeric where possible)
  double commit = 0;           // sync, close, rename
  double total = 0;

  double& of(Phase phase) {
    switch (phase) {
      case Phase::read: return read;
      case Phase::exchange: return exchange;
      case Phase::build: return build;
      case Phase::setup: return setup;
      case Phase::symbolic: return symbolic;
      case Phase::numeric: return numeric;
      case Phase::commit: return commit;
    }
    return total;
  }
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void phase_started(Phase /*phase*/) {}
  // The numeric phase counts `tiles` output tiles of `macs_per_tile` multiply-adds each.
  virtual void counting(std::int64_t /*tiles*/, double /*macs_per_tile*/) {}
  // A counter that backends bump from their loops, for a display that moves inside a chunk.
  virtual std::atomic<std::int64_t>* tile_counter() { return nullptr; }
  // At least `done` tiles are finished (a backend's report of a chunk handed to the writer).
  virtual void tiles_done(std::int64_t /*done*/) {}
  // The backends are made: their kind's name.
  virtual void backend_chosen(const std::string& /*name*/) {}
};

// Times one phase: from construction to destruction (or stop()), added to times.of(phase).
class PhaseScope {
 public:
  PhaseScope(PhaseTimes& times, Observer& observer, Phase phase) : times_(times), phase_(phase) {
    observer.phase_started(phase);
  }
  ~PhaseScope() { stop(); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;
  double stop() {
    if (stopped_) return 0;
    stopped_ = true;
    const double seconds = clock_.seconds();
    times_.of(phase_) += seconds;
    return seconds;
  }

 private:
  PhaseTimes& times_;
  Phase phase_;
  Stopwatch clock_;
  bool stopped_ = false;
};

}  // namespace blockmm::multiply
