// Bodies run at once, each on a thread of its own (a team's backends in multiply/pipeline.cpp),
// and what happens where a process may not start that many threads.
#pragma once

#include <cstddef>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

namespace blockmm {

// How run_each_on_a_thread starts a thread; tests pass one that fails.
struct StartThread {
  template <typename Function>
  std::thread operator()(Function&& function) const {
    return std::thread(std::forward<Function>(function));
  }
};

// Runs body(w) for each w < `count` at once, on a thread of its own where there are
// several, and rethrows the first failure (by w) once every one has ended. Where a thread
// cannot be started (a process or cgroup limit on threads: ulimit -u, pids.max; std::system_error,
// or std::bad_alloc for its state), the bodies left run on the calling thread, one after another,
// while the started ones run: the bodies never wait for each other, and a std::thread destroyed
// joinable, as the started ones were when the exception left this function, ends the process.
template <typename Body, typename Start = StartThread>
void run_each_on_a_thread(std::size_t count, Body&& body, Start&& start = Start{}) {
  if (count == 1) return body(std::size_t{0});
  std::vector<std::exception_ptr> failures(count);
  const auto run = [&](std::size_t w) {
    try {
      body(w);
    } catch (...) {
      failures[w] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(count);  // before any thread starts: nothing can fail between a start and its keeping
  std::size_t started = 0;
  for (; started < count; ++started) {
    try {
      threads.push_back(start([&run, started] { run(started); }));
    } catch (...) {
      break;
    }
  }
  for (std::size_t w = started; w < count; ++w) run(w);
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace blockmm
