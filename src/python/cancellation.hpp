// A product's cancellation (Ctrl-C in Python): a flag that a signal handler may set, checked where
// the product can stop cleanly (a phase's start, a chunk handed to the writer, the writer's begin).
// A check that finds it set throws; the exception unwinds the product like any failure, and the
// caller, seeing requested(), reports the interruption instead of the error it became on the way.
#pragma once

#include <atomic>

#include "core/error.hpp"

namespace blockmm::python {

class Cancellation {
 public:
  // `flag`: set (by any thread, or a signal handler) to cancel; null: never cancelled.
  explicit Cancellation(const std::atomic<bool>* flag = nullptr) : flag_(flag) {}
  bool requested() const { return flag_ != nullptr && flag_->load(std::memory_order_relaxed); }
  void check() const {
    if (requested()) throw Error(ExitCode::other, "interrupted");
  }

 private:
  const std::atomic<bool>* flag_;
};

}  // namespace blockmm::python
