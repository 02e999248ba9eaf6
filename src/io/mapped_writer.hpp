// Writing a rank's part of an output file by several threads: the file's storage is reserved
// first (fallocate, so a full disk or a file-size limit is an error up front, and a page of the map
// can never fault for want of space), and each large write_at maps its range MAP_SHARED and is
// copied into it by a small team of threads. One-file pwrite(2) calls are serialised by the
// file's lock (more threads do not write faster); copies into a shared map are not.
// Only for a file every rank sees through one node's page cache: ranks on several nodes keep
// MPI-IO (file_access.hpp), whose file systems do not promise coherent shared maps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/file_access.hpp"

namespace blockmm::io {

// How a rank writes (WritePolicy, file_access.hpp), from the settings the driver read once:
// `requested_threads` copying threads where mapped (0: min(rank_threads, 8), at least 1; a count
// asked for by name maps on any file system and HDF5 too), huge folios on tmpfs or not,
// `pwrite_only` never mapped, `tmpfs_fallocate` reserving tmpfs by fallocate (comparisons).
constexpr int kMaxWriteThreads = 64;
WritePolicy write_policy(int requested_threads, bool huge, bool pwrite_only, bool tmpfs_fallocate, int rank_threads);

// Whether a file is written through shared maps (else one pwrite stream). By default only on
// tmpfs by a rank of kMinDefaultMapThreads or more threads: to the local disk one pwrite stream
// is faster, and so it is where a rank has too few threads for the copies to outrun it (the map
// also clears each page on first touch and fills and tears down page tables). There binary
// output is mapped, and HDF5 output where it goes into huge folios (in 4 KiB pages it loses to
// pwrite).
constexpr int kMinDefaultMapThreads = 4;
struct MapChoice {
  bool pwrite_forced = false;   // BLOCKMM_IO=pwrite
  bool mappable = true;         // a regular file, not written through MPI-IO, its size reserved
  bool threads_forced = false;
  bool tmpfs = false;
  bool huge = false;            // huge folios wanted and possible there (huge_folios_possible)
  bool hdf5 = false;
  int threads = 1;
};
bool maps_output(const MapChoice& choice);
bool on_tmpfs(int fd);
// Whether the kernel can put this file's pages in huge folios: a tmpfs, MADV_COLLAPSE and
// MADV_POPULATE_WRITE known (Linux 6.1), and shmem_enabled not "deny".
bool huge_folios_possible(int fd);
// What decides huge pages for new tmpfs pages, for --stats: "shmem_enabled=never huge=never"
// (the sysfs setting and the mount's huge= option); "" where `fd` is not on tmpfs.
std::string tmpfs_huge_settings(int fd);

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
// has its pages prepared (huge folios on tmpfs where `huge` and the kernel can) and copied into
// by `threads` threads (the caller's counts as one), and unmaps it; write_fields scatters records
// the same way; smaller writes, and a range that cannot be mapped, are pwrite(2). prepare_ahead
// prepares the pages of ranges said ahead on threads of its own (tmpfs only). Writes are
// synchronous: when they return the bytes are in the file's pages (the source may be reused).
// Calls are serialised. sync_and_close fsyncs and closes. Returns null (and takes nothing) where
// the file cannot be mapped at all: the caller falls back to pwrite.
std::unique_ptr<FileWriter> make_mapped_writer(int fd, std::int64_t size, int threads, const std::string& shown,
                                               bool huge = true);

}  // namespace blockmm::io
