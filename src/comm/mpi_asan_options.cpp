// AddressSanitizer defaults for programs that start MPI (CMake's blockmm_mpi_program() compiles
// this into each of them). Empty in other builds.
//
// Open MPI's libraries have no frame pointers, and the leaks it never frees are matched to
// tests/sanitizers/lsan.supp by frames deep in their stacks, so these programs unwind every
// allocation's stack in full. Other programs keep the fast unwinder, which is five times faster
// on the tests' own allocations. ASAN_OPTIONS, when it names the flag, still decides.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
#endif
