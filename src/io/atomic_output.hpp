// Outputs appear whole or not at all: data goes to a temporary file beside the target, created
// with O_EXCL | O_NOFOLLOW (so a run never writes through someone else's file or link), which is
// fsync'd and renamed over the target only when complete. Rank 0 holds the temporary file's
// descriptor from creation to rename and writes (and lets HDF5 write) through it, never by
// reopening the name; other ranks open the name without following links and check that they got
// the file rank 0 created; at commit rank 0 checks that the name still points at the file written
// before it renames. Interrupted runs (SIGINT, SIGTERM, SIGHUP, SIGQUIT, and SIGPIPE, which kills a
// rank whose launcher is gone) remove the temporary file from a signal handler; temporary files
// of killed runs (SIGKILL) carry the host and process id in their name; the process that created
// a temporary holds a lock on it while it lives, and the next run writing into the same folder
// removes those whose lock is free (stale_temporaries.hpp).
// A character device as target (/dev/null, say, for timing runs) is written in place: renaming
// over it would replace the device node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "io/file_access.hpp"
#include "io/mapped_writer.hpp"
#include "io/stale_temporaries.hpp"

namespace blockmm::io {

// Installs the signal handlers that remove registered temporary files, and ignores SIGXFSZ so
// that a file-size limit (ulimit -f) makes writes fail with EFBIG (exit 4) instead of killing
// the process. Call once, early.
void install_cleanup_handlers();

// Removes the registered temporary files; async-signal-safe, for handlers that end the process.
void remove_temporary_from_signal_handler() noexcept;
// Registers a temporary file (by name) for those handlers; returns a slot for disarming, or -1
// where none is left (the next run's sweep of stale temporaries then removes a leftover).
// AtomicOutput registers its own; a parted output's ranks register each other's parts.
int arm_temporary_cleanup(const std::string& path);
void disarm_temporary_cleanup(int slot);

// The name of the temporary file for `target` without its random suffix:
// "<dir>/.<name>.blockmm-tmp.[lk.]<host>.<pid>." ("lk." where `locked`; path_names.hpp).
std::string temporary_prefix(const std::string& target, const std::string& host, long pid, bool locked);
// Creates the temporary file for `target` (O_EXCL, mode 0666 less the umask), holding its liveness
// lock (`take_lock`, stale_temporaries.hpp) under the marked name where the lock can be taken,
// else under the unmarked name, which no sweep removes. Throws OutputError (exit 4). Each name is
// armed for the signal handlers before the file exists (a signal between its creation and its
// arming left it behind), its slot returned with it (-1: no room to arm it).
struct CreatedTemporary {
  int fd = -1;
  std::string path;
  bool locked = false;
  int cleanup_slot = -1;
};
CreatedTemporary create_temporary(const std::string& target, const std::string& host, long pid,
                                  bool (*take_lock)(int) = hold_liveness_lock);
// This host's name as it appears in temporary names ([A-Za-z0-9_-], at most 32 characters).
std::string temporary_host_tag();

class AtomicOutput {
 public:
  // Collective: rank 0 removes stale temporary files in the target's folder (of any output) left
  // by killed runs (stale_temporaries.hpp), creates "<dir>/.<name>.blockmm-tmp.lk.<host>.<pid>.XXXXXX"
  // and holds its liveness lock until the commit (create_temporary), and every rank learns its name.
  // Throws OutputError (exit 4) when the directory does not take new files or the existing target
  // is read-only.
  AtomicOutput(const std::string& target, const comm::Communicator& comm);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  // The temporary file's name (for messages), or the target itself when it is a character device.
  const std::string& temporary_path() const { return temporary_; }
  bool writes_in_place() const { return in_place_; }
  // The temporary file's identity (device and inode, as rank 0's fstat saw it).
  std::uint64_t device() const { return device_; }
  std::uint64_t inode() const { return inode_; }
  const std::string& target() const { return target_; }

  // A name by which a library that opens files by name (libhdf5) reaches the file rank 0 created,
  // whatever its directory entry points at by then: /proc/self/fd/N on rank 0 (the temporary name
  // where /proc is missing, or on other ranks).
  std::string path_for_library() const;

  // tmpfs_huge_settings() of the temporary file (rank 0's view, broadcast at creation; "" where
  // it is not on tmpfs or written in place).
  const std::string& tmpfs_huge_settings() const { return tmpfs_settings_; }

  // OutputError when the temporary name no longer holds the file rank 0 created (someone swapped
  // it for a link or another file); rank 0 only (a no-op elsewhere). Cheap: writers call it before
  // the long numeric phase, so a swap fails the run early, and after a library failed, to say why.
  void check_not_replaced() const;

  // Rank 0: sets aside `bytes` of disk for the temporary file (posix_fallocate), so that writing a
  // small file later (the stats, after the product's commit) cannot fail for space; finish with
  // set_size(). No-op in place, on other ranks, and where the file system cannot reserve.
  void reserve(std::int64_t bytes) const;
  void set_size(std::int64_t bytes) const;

  // Collective: a writer of the temporary file (rank 0: through its descriptor; other ranks: the
  // name, refusing links and any file but the one rank 0 created).
  std::unique_ptr<FileWriter> open_writer() const;
  // Collective: the same, for a file of (at least) `bytes` bytes written under `policy`. Where
  // the file will be mapped (will_map(): by default on tmpfs), rank 0 first reserves the file's
  // storage (fallocate: a full disk or a file-size limit is an OutputError here, exit 4, before
  // any compute), then each rank maps the file and copies into the map (mapped_writer.hpp).
  // Where the file system cannot reserve, the target is written in place (a character device),
  // ranks use MPI-IO or the map is not chosen, it is open_writer().
  std::unique_ptr<FileWriter> open_writer(std::int64_t bytes, const WritePolicy& policy, bool hdf5) const;

  // Collective, after every rank has closed its writer: rank 0 checks the temporary name still
  // holds the file written, gives it the existing target's permissions (or those a new file gets
  // from the umask), renames it over the target and syncs the directory; all ranks learn the
  // outcome. Where the target replaced was a parted output, its part files are removed after the
  // rename (output_parts.hpp), except those of `kept_part_generation` (the new output's own).
  // `replace` false: an existing target is never replaced (the commit fails instead); `mode` >= 0:
  // these permissions instead (a part file takes its main file's).
  struct CommitOptions {
    bool replace = true;
    int mode = -1;
    std::string kept_part_generation;
  };
  void commit();
  void commit(const CommitOptions& options);
  // Rank 0: the permissions commit() gives the file (the existing target's, or a new file's).
  unsigned final_mode() const;
  void abandon() noexcept;

 private:
  void rename_without_replacing() const;
  const comm::Communicator& comm_;
  std::string target_;
  std::string temporary_;
  int fd_ = -1;                 // rank 0: the temporary file, held until commit
  std::uint64_t device_ = 0;    // the temporary file's identity (from rank 0's fstat)
  std::uint64_t inode_ = 0;
  unsigned created_mode_ = 0;   // permissions a plain creat(2) gave it (umask, default ACLs)
  int cleanup_slot_ = -1;
  bool done_ = false;
  bool in_place_ = false;
  std::string tmpfs_settings_;
};

}  // namespace blockmm::io
