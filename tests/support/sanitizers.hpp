// BLOCKMM_TEST_ASAN is defined when the test is built with AddressSanitizer (GCC or Clang), whose
// shadow memory makes address-space limits (RLIMIT_AS) and some MPI start-up timings meaningless.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define BLOCKMM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKMM_TEST_ASAN 1
#endif
#endif

#include <initializer_list>
#include <vector>

namespace blockmm::testing {

// The values a sweep tries: `all` in the release build; under AddressSanitizer (CI's second
// pass over the suite, which looks for memory errors in the same code paths, each run 3-5x
// slower) the first and the last, which bracket the paths the sweep takes.
template <typename T>
std::vector<T> sweep(std::initializer_list<T> all) {
#ifdef BLOCKMM_TEST_ASAN
  if (all.size() > 2) return {*all.begin(), *(all.end() - 1)};
#endif
  return all;
}

}  // namespace blockmm::testing
