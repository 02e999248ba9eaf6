// Writing a rank's part of an output file by several threads: the file's storage is reserved
// first (fallocate, so a full disk or a file-size limit is an error up front, and a page of the map
// can never fault for want of space), the file is mapped MAP_SHARED, and each write_at is copied
// into the map by a small team of threads. One-file pwrite(2) calls are serialised by the
// file's lock (2.4 GB/s on tmpfs whatever the thread count); copies into a shared map are not.
// Only for a file every rank sees through one node's page cache: ranks on several nodes keep
// MPI-IO (file_access.hpp), whose file systems do not promise coherent shared maps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/file_access.hpp"

namespace blockmm::io {

// Copying threads for a rank's output: BLOCKMM_WRITE_THREADS when set (1 to kMaxWriteThreads,
// else a UsageError), otherwise min(rank_threads, 8) (8 threads measured 5.3 GB/s into tmpfs on
// a 16-core node; more add little but contention with the compute).
constexpr int kMaxWriteThreads = 64;
int output_writer_threads(int rank_threads);

// Reserves bytes [0, bytes) of the regular file `fd` (Linux fallocate, mode 0: the size grows to
// `bytes` when smaller; contents already there stay). Returns false where the file system cannot
// reserve (EOPNOTSUPP, ENOSYS: the caller then writes through pwrite); other failures (ENOSPC,
// EFBIG, EIO, ...) are OutputErrors naming `shown`.
bool reserve_file_space(int fd, std::int64_t bytes, const std::string& shown, const std::string& temporary);

// A writer that copies into a MAP_SHARED map of bytes [0, size) of `fd` (which it takes, open
// read-write, on a regular file whose first `size` bytes are reserved) with `threads` threads
// (the caller's counts as one). write_at is synchronous: when it returns the bytes are in the map
// (the source may be reused). Calls are serialised. sync_and_close unmaps, fsyncs and closes.
// Returns null (and closes nothing) where mmap fails: the caller falls back to pwrite.
std::unique_ptr<FileWriter> make_mapped_writer(int fd, std::int64_t size, int threads, const std::string& shown);

}  // namespace blockmm::io
