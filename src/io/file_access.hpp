// Positioned reads and writes of one file, by POSIX calls (single rank) or MPI-IO (several
// ranks). Sizes are int64 throughout; MPI's int counts are handled by writing in pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace blockmm::io {

class FileReader {
 public:
  virtual ~FileReader() = default;
  virtual void read_at(std::int64_t offset, void* destination, std::int64_t bytes) = 0;
  // Whether several threads may call read_at at once.
  virtual bool concurrent() const { return false; }
};

class FileWriter {
 public:
  virtual ~FileWriter() = default;
  virtual void write_at(std::int64_t offset, const void* source, std::int64_t bytes) = 0;
  // Collective: flush to stable storage and close.
  virtual void sync_and_close() = 0;
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
// paths the writer copies into a shared map of them with `threads` threads (plain pwrite where
// mmap fails); MPI-IO and map_bytes <= 0 write as before.
// `map_any_file`: the map on any file system, not only tmpfs (WriterPolicy::map_any_file).
std::unique_ptr<FileWriter> open_temporary_writer(const std::string& path, const std::string& shown_name,
                                                  const comm::Communicator& comm, int held, std::uint64_t device,
                                                  std::uint64_t inode, std::int64_t map_bytes = 0, int threads = 1,
                                                  bool map_any_file = false);

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
