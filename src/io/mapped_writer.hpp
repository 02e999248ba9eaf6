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

// Copying threads for a rank's output, 0 meaning one pwrite stream (no map). BLOCKMM_WRITE_THREADS
// when set (1 to kMaxWriteThreads, else a UsageError): that many, mapped. Otherwise
// min(rank_threads, 8) when that is at least kMinDefaultMapThreads, else 0: on the 2-core
// development VM one pwrite stream wrote 1.6 GB into tmpfs at 2.3 GB/s (median of 5) and the map
// at 1.5-1.6 with 1, 2 or 4 threads (a fresh page is cleared when first touched through a map,
// never by pwrite); on the 16-core H200 node, 2 GB into tmpfs: pwrite 2.3 GB/s, the map 2.7-2.9
// with 4-16 threads (the 5.3 was not reached), and to the local disk 1.9 against 1.3, so
// by default the map serves binary output into tmpfs only (make_mapped_writer, make_product_writer).
constexpr int kMaxWriteThreads = 64;
constexpr int kMinDefaultMapThreads = 4;
int output_writer_threads(int rank_threads);
// Whether BLOCKMM_WRITE_THREADS asks for the map: then it is used on any file system and for
// HDF5 too; by default only binary output into tmpfs is mapped (where it was measured faster).
bool write_threads_forced();
bool on_tmpfs(int fd);

// Reserves bytes [0, bytes) of the regular file `fd` (Linux fallocate, mode 0: the size grows to
// `bytes` when smaller; contents already there stay). Returns false where the file system cannot
// reserve (EOPNOTSUPP, ENOSYS: the caller then writes through pwrite); other failures (ENOSPC,
// EFBIG, EIO, ...) are OutputErrors naming `shown`. On tmpfs, where the kernel reports population
// errors (populate_reports_errors()), the size is set and the free space checked instead, and the
// copying threads allocate the pages (mapped_writer.cpp says why); BLOCKMM_TMPFS_FALLOCATE=1
// forces fallocate there too (for comparisons).
bool reserve_file_space(int fd, std::int64_t bytes, const std::string& shown, const std::string& temporary);
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
