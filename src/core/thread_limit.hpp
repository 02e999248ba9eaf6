// The most OpenMP threads a process of blockmm (or its tools) may ask for, and the check of
// --threads and OMP_NUM_THREADS against it. libgomp creates a team's threads when a parallel
// region first starts and dies (abort, no message) when it cannot; so an absurd count must be a
// usage error before anything is created. The limit is a constant, not a function of the machine,
// so that every MPI rank reaches the same verdict from the same command line.
#pragma once

#include <cctype>
#include <string>

#include "core/error.hpp"

namespace blockmm {

// 1024 threads a process: 4x the hardware threads of the largest nodes in use today, far past the
// point where more threads stop helping, and well inside the thread and memory-map limits of a
// default Linux system (each thread reserves its stack).
constexpr long kMaxThreads = 1024;

// Throws UsageError when `threads` exceeds kMaxThreads; `what` names the source ("--threads").
inline void check_thread_count(long long threads, const std::string& what) {
  if (threads > kMaxThreads)
    throw UsageError(what + " " + std::to_string(threads) + " exceeds the limit of " + std::to_string(kMaxThreads) +
                     " threads per process");
}

// The text of a thread-count option (`what`, e.g. "--threads"): a whole number from 0 (automatic)
// to kMaxThreads. Anything else is a UsageError of one short line naming the option and the
// range; a count above the limit gets check_thread_count's message.
inline int parse_thread_count(const std::string& text, const std::string& what) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (text.empty() || digits != text.size())
    throw UsageError(what + " '" + quoted_value(text) + "': expected a whole number from 0 (automatic) to " +
                     std::to_string(kMaxThreads));
  // More than 12 digits passes any limit; std::stoll would overflow on longer strings.
  if (text.size() > 12)
    throw UsageError(what + " " + quoted_value(text) + " exceeds the limit of " + std::to_string(kMaxThreads) +
                     " threads per process");
  const long long count = std::stoll(text);
  check_thread_count(count, what);
  return static_cast<int>(count);
}

// OMP_NUM_THREADS (`value`, "" where unset) is a comma-separated list (one count per nesting
// level); each count must be at most kMaxThreads. Text libgomp would not read as a number is left
// to libgomp (it ignores it).
inline void check_omp_num_threads(const std::string& value) {
  if (value.empty()) return;
  std::size_t at = 0;
  while (at <= value.size()) {
    std::size_t end = value.find(',', at);
    if (end == std::string::npos) end = value.size();
    std::string item = value.substr(at, end - at);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(item.begin());
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    bool digits = !item.empty();
    for (char c : item) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    // More than 12 digits passes any limit; std::stoll would overflow on longer strings.
    if (digits && (item.size() > 12 || std::stoll(item) > kMaxThreads))
      throw UsageError("OMP_NUM_THREADS=" + quoted_value(value) + " asks for more than the limit of " +
                       std::to_string(kMaxThreads) + " threads per process");
    at = end + 1;
  }
}

}  // namespace blockmm
