// Writing a rank's part of an output file by several threads: the file's storage is reserved
// first (fallocate, so a full disk or a file-size limit is an error up front, and a page of the map
// can never fault for want of space), and each large write_at maps its range MAP_SHARED and is
// copied into it by a small team of threads. One-file pwrite(2) calls are serialised by the
// file's lock (2.4 GB/s on tmpfs whatever the thread count); copies into a shared map are not.
// Only for a file every rank sees through one node's page cache: ranks on several nodes keep
// MPI-IO (file_access.hpp), whose file systems do not promise coherent shared maps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/file_access.hpp"

namespace blockmm::io {

// Copying threads a rank may use by default, and the fewest for which the map pays by default:
// below that one pwrite stream is as fast into tmpfs (a fresh page is cleared when first touched
// through a map, never by pwrite), and on a local disk pwrite beat the map (bench/NOTES.md item 10).
constexpr int kMaxWriteThreads = 64;
constexpr int kMinDefaultMapThreads = 4;

// How a rank writes its output: the copying threads (0: one pwrite stream), and where the map
// serves. Chosen once, by writer_policy(), and handed to the writers.
struct WriterPolicy {
  int threads = 0;
  // Threads asked for by name: the map serves any file system and HDF5 too; by default only
  // binary output into tmpfs is mapped (where it was measured faster).
  bool map_any_file = false;
  // tmpfs storage reserved by fallocate as on other file systems (for comparisons).
  bool tmpfs_fallocate = false;
};

// `requested_threads`: 0 to choose (min(rank_threads, 8) when that is at least
// kMinDefaultMapThreads, else one pwrite stream), or 1 to kMaxWriteThreads, mapped on any file.
// `pwrite_only`: never the map.
WriterPolicy writer_policy(int requested_threads, bool pwrite_only, bool tmpfs_fallocate, int rank_threads);

bool on_tmpfs(int fd);

// Reserves bytes [0, bytes) of the regular file `fd` (Linux fallocate, mode 0: the size grows to
// `bytes` when smaller; contents already there stay). Returns false where the file system cannot
// reserve (EOPNOTSUPP, ENOSYS: the caller then writes through pwrite); other failures (ENOSPC,
// EFBIG, EIO, ...) are OutputErrors naming `shown`. On tmpfs, where the kernel reports population
// errors (populate_reports_errors()), the size is set and the free space checked instead, and the
// copying threads allocate the pages (mapped_writer.cpp says why); `tmpfs_fallocate` forces
// fallocate there too (for comparisons).
bool reserve_file_space(int fd, std::int64_t bytes, const std::string& shown, const std::string& temporary,
                        bool tmpfs_fallocate = false);
// Whether madvise(MADV_POPULATE_WRITE) exists here (Linux 5.14): a page the file system cannot
// back is then an error code for the copying thread, never a SIGBUS.
bool populate_reports_errors();

// A writer of bytes [0, size) of `fd` (which it takes, open read-write, on a regular file whose
// first `size` bytes are reserved): each write_at of 256 KiB or more maps its range MAP_SHARED,
// copies into it with `threads` threads (the caller's counts as one) and unmaps it; smaller ones,
// and a range that cannot be mapped, are pwrite(2). write_at is synchronous: when it returns the
// bytes are in the file's pages (the source may be reused). Calls are serialised.
// sync_and_close fsyncs and closes. Returns null (and takes nothing) where the file cannot be
// mapped at all: the caller falls back to pwrite.
std::unique_ptr<FileWriter> make_mapped_writer(int fd, std::int64_t size, int threads, const std::string& shown);

}  // namespace blockmm::io
