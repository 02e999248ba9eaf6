// Positioned reads and writes of one file, by POSIX calls (single rank) or MPI-IO (several
// ranks). Sizes are int64 throughout; MPI's int counts are handled by writing in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"

namespace blockmm::io {

class FileReader {
 public:
  virtual ~FileReader() = default;
  virtual void read_at(std::int64_t offset, void* destination, std::int64_t bytes) = 0;
  // Whether several threads may call read_at at once.
  virtual bool concurrent() const { return false; }
};

// How a rank writes its output files (write_policy(), mapped_writer.hpp, from the settings the
// driver read once), passed down to the writers.
struct WritePolicy {
  int threads = 1;               // copying threads where mapped
  bool threads_forced = false;   // a count asked for (BLOCKMM_WRITE_THREADS): mapped on any file system
  bool huge = true;              // huge folios on tmpfs where the kernel makes them (BLOCKMM_HUGE_OUTPUT)
  bool pwrite_only = false;      // never the map (BLOCKMM_IO=pwrite)
  bool tmpfs_fallocate = false;  // tmpfs reserved by fallocate (BLOCKMM_TMPFS_FALLOCATE)
};

// One field of a record copied to its own place in a file: bytes [record_offset, record_offset +
// bytes) of record t go to file_offset + t * bytes (an HDF5 output's block-column into /indices,
// its values into /data).
struct FieldCopy {
  std::int64_t record_offset = 0;
  std::int64_t bytes = 0;
  std::int64_t file_offset = 0;
};

// How a writer wrote, for --stats.
struct WriterReport {
  bool mapped = false;            // copied into shared maps (else pwrite or MPI-IO)
  int threads = 1;                // copying threads
  std::int64_t huge_extents = 0;  // 2 MiB extents of tmpfs made one huge folio before the copy
  std::int64_t small_extents = 0; // whole 2 MiB extents that stayed in 4 KiB pages
};

// A check of records [first, first + count) of a write_fields call (numbered from its first
// record): `keys` holds their first 8 bytes (block-row and block-column, COL380's record),
// record first + t's at keys + 8 t, split out by the copy into a small array in the core's cache.
// Run on the copying threads, several pieces at once. False: the records must not be written.
using RecordCheck = std::function<bool(std::int64_t first, std::int64_t count, const std::byte* keys)>;

class FileWriter {
 public:
  virtual ~FileWriter() = default;
  virtual void write_at(std::int64_t offset, const void* source, std::int64_t bytes) = 0;
  // Scatters the fields of `count` records of `stride` bytes (FieldCopy; records of at least 8
  // bytes where `check` is given), each piece of them passed to `check` (where given) as it is
  // copied. Returns false where a check failed: the write then stopped, and the fields' bytes of
  // this call are undefined. The default stages each field in cache-sized pieces and writes it
  // with write_at; a mapped writer copies straight into the file's pages with its threads.
  virtual bool write_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                            const std::vector<FieldCopy>& fields, const RecordCheck& check = nullptr);
  // The byte ranges this rank will write, said ahead: a mapped writer on tmpfs prepares their
  // pages (huge folios where it can) on `threads` threads of its own beside the compute, so that
  // the writes find them; others ignore it. Ranges must lie inside the file.
  virtual void prepare_ahead(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, int threads) {
    (void)ranges;
    (void)threads;
  }
  // Ranges said ahead with no threads (prepare_ahead(ranges, 0)) can be prepared by the caller's,
  // a step at a time: how many steps they make (0: nothing to prepare), and step `step` (steps in
  // the ranges' order; any number at once, beside the writes, until sync_and_close). 0, or an
  // errno that the writes will meet too.
  virtual std::int64_t ahead_steps() const { return 0; }
  virtual int prepare_step(std::int64_t step) {
    (void)step;
    return 0;
  }
  // Collective: flush to stable storage and close.
  virtual void sync_and_close() = 0;
  virtual WriterReport report() const { return {}; }
};

// Collective under MPI (every rank opens). Errors are InputError (reader) / OutputError (writer).
std::unique_ptr<FileReader> open_reader(const std::string& path, const comm::Communicator& comm);
std::unique_ptr<FileWriter> open_writer(const std::string& path, const std::string& shown_name,
                                        const comm::Communicator& comm);

// A writer of a temporary output file that rank 0 created (atomic_output.hpp). `held` >= 0: this
// process's descriptor of it, which the writer duplicates (no reopening by name). Otherwise the
// name is opened without following a link, and the writer refuses any file but the one with
// `inode` (and `device` on POSIX paths, which share rank 0's view of the file system): a name
// swapped for a link or another file is an OutputError, never written through.
// `map_bytes` > 0: the first map_bytes of the file are reserved (mapped_writer.hpp), and on POSIX
// paths the writer copies into shared maps of them where maps_output() says so for `policy` and
// this file (plain pwrite where mmap fails); MPI-IO and map_bytes <= 0 write as before.
std::unique_ptr<FileWriter> open_temporary_writer(const std::string& path, const std::string& shown_name,
                                                  const comm::Communicator& comm, int held, std::uint64_t device,
                                                  std::uint64_t inode, std::int64_t map_bytes = 0,
                                                  const WritePolicy& policy = {}, bool hdf5 = false);
// Whether rank 0 should reserve a file it holds as `fd` for a mapped writer under `policy`.
bool will_map(int fd, const WritePolicy& policy, bool hdf5);

// Whether writers of this run's files use MPI-IO (comm::Communicator::file_access).
bool writes_through_mpi_io(const comm::Communicator& comm);

// read(2) / pwrite(2) loops that survive EINTR and short transfers.
void read_fully(int fd, std::int64_t offset, void* destination, std::int64_t bytes, const std::string& path);
void write_fully(int fd, std::int64_t offset, const void* source, std::int64_t bytes, const std::string& path);

// Flushes std::cout and stdout. Throws OutputError "standard output: cannot write: <reason><note>"
// when a write to them failed (a full disk, /dev/full, a closed pipe): text a program printed and
// lost is a failure, exit 4, not a success.
void flush_standard_output(const std::string& note = "");

}  // namespace blockmm::io
