// The first exception thrown inside an OpenMP parallel region, kept for rethrowing after it.
// An exception that leaves a region's structured block calls std::terminate (abort, exit 134,
// temporary files left behind), so every region that can throw (allocations: std::bad_alloc)
// catches into one of these and the caller rethrows once the region has ended. Threads must
// still reach every worksharing construct of the region (or the others wait at its barrier
// forever): after a failure they run the remaining iterations as no-ops (see failed()).
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace blockmm {

class ParallelFailure {
 public:
  // Runs `work`, keeping what it throws (the first exception of any thread wins).
  template <typename Work>
  void run(Work&& work) noexcept {
    try {
      std::forward<Work>(work)();
    } catch (...) {
      capture();
    }
  }
  // Call from a catch (...) block.
  void capture() noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_relaxed);
  }
  // Whether some thread failed: the rest of the work is pointless.
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
  // After the region: rethrows the kept exception, if any.
  void rethrow_if_failed() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
};

}  // namespace blockmm
