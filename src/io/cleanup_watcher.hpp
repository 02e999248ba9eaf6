// A small process that outlives this one only to remove its temporary outputs (atomic_output.hpp)
// when this process ends without committing or removing them itself, which no handler of its own
// can catch: SIGKILL of this process alone (kill -9, the kernel's OOM killer) or an _exit inside
// a library (Open MPI ends each rank so when its launcher is gone, which is what mpirun's second
// Ctrl-C does: mpirun exits at once and signals no rank).
//
// Forked at the start of the program, while it has one thread (before MPI and CUDA start). It
// ignores the signals that end a run (a Ctrl-C reaches the whole process group, and the run's own
// handler removes its files then), keeps no descriptor but its end of a socket pair, and learns of
// each temporary file as it is registered (its name and inode) and unregistered. When the socket
// reports that this process has ended, however it ended, it removes each file still registered
// whose name still holds that inode, and exits. A signal to the whole process group (SIGKILL of a
// job's processes) ends the watcher too; then the next run writing into that folder removes the
// file (AtomicOutput's sweep). Where the process cannot fork, there is no watcher.
#pragma once

#include <cstdint>

namespace blockmm::io {

// Starts the watcher (once; later calls do nothing). Call while the process has one thread.
void start_cleanup_watcher() noexcept;

// Registers temporary file `slot` (0 <= slot < kWatchedSlots): `path` (NUL-terminated), holding
// inode `inode`. Unregister it once it is committed (renamed) or removed. No-ops without a watcher.
constexpr int kWatchedSlots = 8;
void watch_temporary(int slot, const char* path, std::uint64_t inode) noexcept;
void unwatch_temporary(int slot) noexcept;

}  // namespace blockmm::io
