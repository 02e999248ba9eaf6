// core/each_on_a_thread.hpp: each body on a thread of its own; where threads
// cannot be started (ulimit -u, a cgroup's pids.max: std::system_error after some have started),
// the rest run on the calling thread instead of the process ending in std::terminate with the
// started threads still joinable; a body's failure is rethrown once every one has ended.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "core/each_on_a_thread.hpp"

namespace blockmm {
namespace {

// Starts `allowed` threads, then fails as std::thread does at a process's thread limit.
struct LimitedStart {
  std::size_t allowed;
  std::size_t* started;
  template <typename Function>
  std::thread operator()(Function&& function) const {
    if (*started == allowed) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++*started;
    return std::thread(std::forward<Function>(function));
  }
};

TEST(EachOnAThread, PastTheThreadLimitTheRestRunOnTheCallingThread) {
  for (std::size_t allowed : {0u, 1u, 2u, 3u}) {
    std::mutex mutex;
    std::vector<std::thread::id> ran_on(3);
    std::size_t started = 0;
    run_each_on_a_thread(
        3,
        [&](std::size_t w) {
          const std::lock_guard<std::mutex> hold(mutex);
          ran_on[w] = std::this_thread::get_id();
        },
        LimitedStart{allowed, &started});
    EXPECT_EQ(started, allowed);
    for (std::size_t w = 0; w < 3; ++w) {
      EXPECT_NE(ran_on[w], std::thread::id()) << "backend " << w << " did not run (" << allowed << " threads)";
      EXPECT_EQ(ran_on[w] == std::this_thread::get_id(), w >= allowed) << "backend " << w << ", " << allowed << " threads";
    }
  }
}

TEST(EachOnAThread, TheFirstFailureIsRethrownOnceEveryBodyHasEnded) {
  std::atomic<int> ended{0};
  std::size_t started = 0;
  try {
    run_each_on_a_thread(
        3,
        [&](std::size_t w) {
          ++ended;
          if (w != 0) throw std::runtime_error("backend " + std::to_string(w));
        },
        LimitedStart{1, &started});
    FAIL() << "no failure";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "backend 1");
  }
  EXPECT_EQ(ended.load(), 3);
}

}  // namespace
}  // namespace blockmm
