// Temporary outputs of runs that are gone, and how a live run keeps its own (docs/promises.md,
// "Leftovers of killed runs"). A temporary's name says which host and process made it
// (".<name>.blockmm-tmp.lk.<host>.<pid>.XXXXXX", path_names.hpp), but neither proves that run dead:
// a process id means nothing in another PID namespace (a container on the same host sharing the
// folder), and two machines may share a host tag (node1.siteA, node1.siteB). So the process that
// creates a temporary holds an open file description lock (F_OFD_SETLK) on one byte of it far past
// any data, for as long as it holds the file open: until the rename, or until it dies (the kernel,
// or the lock manager of a network file system, then drops the lock). Locks work across PID
// namespaces. The sweep removes a temporary only when it can take that lock itself, the file has
// not changed for kStaleTemporarySeconds (the margin covers the instant between the creation and
// the lock, and clocks a little apart), and the folder's file system shows every host's locks to
// every host. Where it does not (NFS mounted nolock or local_lock=posix|all, Lustre without flock,
// file systems not known to share their locks) or takes no locks at all, nothing is removed.
// Only names marked "lk." are swept: their creator took the lock. A creator that cannot take it
// keeps the unmarked name, as did the blockmm versions before the lock, whose runs (on this host
// or another sharing the folder) would otherwise be taken for dead ones: no sweep removes those.
#pragma once

#include <sys/types.h>

#include <string>

namespace blockmm::io {

// The byte each live temporary's creator locks: beyond any file blockmm writes, so that no other
// lock (MPI-IO's byte-range locks of the data it writes, on NFS) ever meets it. The Python tools
// lock the same byte (python/blockmm/atomic_output.py).
constexpr off_t kLivenessLockOffset = off_t{1} << 62;
// How long a temporary must have been left unchanged before the sweep may remove it.
constexpr long kStaleTemporarySeconds = 600;

// Takes the liveness lock on `fd` (a temporary just created, open for writing). False where the
// file system takes no locks or refuses one for now (ENOLCK: an NFS lock manager out of
// resources) or, never in practice, where another process holds it; the temporary then takes the
// unmarked name (atomic_output.hpp create_temporary).
bool hold_liveness_lock(int fd);

// A temporary output's name read (path_names.hpp): its host, its pid (-1 where `name` is not a
// temporary's) and whether it is marked as held by its liveness lock.
struct TemporaryName {
  std::string host;
  long pid = -1;
  bool locked = false;
};
TemporaryName parse_temporary_name(const std::string& name);

// Whether a lock taken on one host is seen by every host that reaches a file system of type
// `type` (as /proc/self/mountinfo names it) mounted with `options` (its mount and super options,
// joined by commas): local file systems (other hosts reach them only through a server that
// takes their locks here), NFS with its lock manager, Lustre mounted with flock, GPFS, CephFS,
// SMB without nobrl. False for any other.
bool locks_shared_between_hosts(const std::string& type, const std::string& options);
// Whether folder `dir`'s file system is one of those (a known magic number, and for network file
// systems mount options that share locks): the sweep removes nothing elsewhere.
bool folder_shares_locks(const std::string& dir);

// Removes the temporary outputs in `dir` (of any output, made on any host) whose run is provably
// gone: a regular file of this user, named as a marked temporary, unchanged for kStaleTemporarySeconds,
// whose liveness lock is free, in a folder whose file system shares locks between hosts, and, where
// the name's host is `host`, whose process is not one this process can see. Says so on stderr,
// one note a file.
void remove_stale_temporaries(const std::string& dir, const std::string& host);

}  // namespace blockmm::io
