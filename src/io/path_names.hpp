// A path's folder and last name, as the output files' temporaries and parts are named beside
// their target: "." for a bare name, "/" for a name in the root; and the grammar of those
// temporaries' names, which atomic_output.cpp writes, stale_temporaries.cpp and output_parts.cpp
// read, and python/blockmm/atomic_output.py mirrors (its constants of the same names):
//
//   "." <name> ".blockmm-tmp." ["lk."] <host> "." <pid> "." <6 letters or digits>
//
// "lk." marks a temporary whose creator holds its liveness lock (stale_temporaries.hpp); the
// stale-temporary sweep removes only those. A name without it is a temporary whose creator could
// not take the lock, or one of a blockmm from before the lock (which took none): never swept.
// <name> is shortened, with a hash of the whole, where the whole would pass NAME_MAX.
#pragma once

#include <cstddef>
#include <string>

namespace blockmm::io {

constexpr char kTemporaryMarker[] = ".blockmm-tmp.";
constexpr char kLockedTemporaryFlag[] = "lk.";
constexpr std::size_t kTemporaryRandomChars = 6;
constexpr std::size_t kTemporaryPidDigits = 10;  // room reserved for any pid, so a prefix never depends on it
constexpr std::size_t kTemporaryHostChars = 32;
// The bytes of a temporary's name besides <name> and <host>, the flag counted with or without it
// (so that <name> is shortened alike in both forms).
constexpr std::size_t kTemporaryNameExtra = 1 + (sizeof kTemporaryMarker - 1) + (sizeof kLockedTemporaryFlag - 1) +
                                            1 + kTemporaryPidDigits + 1 + kTemporaryRandomChars;

inline std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

inline std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace blockmm::io
