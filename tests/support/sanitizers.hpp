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
