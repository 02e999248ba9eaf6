#include "io/file_access.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"
#include "io/field_scatter.hpp"
#include "io/mapped_writer.hpp"

namespace blockmm::io {
namespace {

constexpr std::int64_t kPiece = std::int64_t{1} << 30;  // keeps pread's and pwrite's sizes in range
constexpr std::int64_t kEarlyWritebackBytes = std::int64_t{4} << 20;
// write_fields' staging: the fields of this many bytes of records at a time, cached in a core's L2.
constexpr std::int64_t kStagingBytes = std::int64_t{512} << 10;

class PosixReader final : public FileReader {
 public:
  explicit PosixReader(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  }
  ~PosixReader() override { ::close(fd_); }
  void read_at(std::int64_t offset, void* destination, std::int64_t bytes) override {
    read_fully(fd_, offset, destination, bytes, path_);
  }
  bool concurrent() const override { return true; }  // pread(2) has no shared file position

 private:
  std::string path_;
  int fd_ = -1;
};

class PosixWriter final : public FileWriter {
 public:
  PosixWriter(const std::string& path, const std::string& shown) : shown_(shown) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw OutputError(shown + ": cannot open the temporary file " + path + ": " + std::strerror(errno));
  }
  // Takes ownership of `fd`.
  PosixWriter(int fd, const std::string& shown) : shown_(shown), fd_(fd) {}
  ~PosixWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }
  // Gives up the descriptor (another owner took it).
  void release() { fd_ = -1; }
  void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
    write_fully(fd_, offset, source, bytes, shown_);
#if defined(__linux__)
    // Start write-back now, every few MB written (also of small writes: an HDF5 output's fields
    // come in cache-sized pieces): otherwise a multi-GB output sits dirty in the page cache until
    // the final fsync, which then pays for all of it after the compute is done.
    unsynced_ += bytes;
    if (unsynced_ >= kEarlyWritebackBytes) {
      (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);  // the whole file: what is dirty
      unsynced_ = 0;
    }
#endif
  }
  void sync_and_close() override {
    // Character devices (/dev/null) may not support fsync; there is nothing to make durable.
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP)
      throw OutputError(shown_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw OutputError(shown_ + ": close failed: " + std::strerror(errno));
  }

 private:
  std::string shown_;
  int fd_ = -1;
  std::int64_t unsynced_ = 0;  // bytes written since write-back was last started
};

class MpiReader final : public FileReader {
 public:
  MpiReader(const std::string& path, std::int64_t piece_bytes) : path_(path), piece_bytes_(piece_bytes) {
    BLOCKMM_MPI_CHECK_AS(MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &file_),
                         ExitCode::bad_input, path + ": cannot open with MPI-IO");
  }
  ~MpiReader() override { MPI_File_close(&file_); }
  void read_at(std::int64_t offset, void* destination, std::int64_t bytes) override {
    auto* out = static_cast<char*>(destination);
    for (std::int64_t done = 0; done < bytes;) {
      const int count = static_cast<int>(std::min(piece_bytes_, bytes - done));
      MPI_Status status;
      BLOCKMM_MPI_CHECK_AS(MPI_File_read_at(file_, offset + done, out + done, count, MPI_BYTE, &status),
                           ExitCode::bad_input, path_ + ": read failed at byte " + std::to_string(offset + done));
      int got = 0;
      BLOCKMM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &got));
      if (got <= 0)
        throw InputError(path_ + ": unexpected end of file at byte " + std::to_string(offset + done) +
                         " (the file changed while being read?)");
      done += got;
    }
  }

 private:
  std::string path_;
  std::int64_t piece_bytes_;
  MPI_File file_ = MPI_FILE_NULL;
};

class MpiWriter final : public FileWriter {
 public:
  MpiWriter(const std::string& path, const std::string& shown, std::int64_t piece_bytes)
      : shown_(shown), piece_bytes_(piece_bytes) {
    BLOCKMM_MPI_CHECK_AS(MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, &file_),
                         ExitCode::output_failure, shown + ": cannot open the temporary file " + path + " with MPI-IO");
    struct stat st {};
    device_ = ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);  // /dev/null: nothing to sync
  }
  ~MpiWriter() override {
    if (file_ != MPI_FILE_NULL) MPI_File_close(&file_);
  }
  // Every write (and the close) throws `why` instead: for a file opened collectively that this
  // rank must not write, where throwing at once would leave the other ranks in a collective.
  void refuse(const std::string& why) { refused_ = why; }
  void write_at(std::int64_t offset, const void* source, std::int64_t bytes) override {
    if (!refused_.empty()) throw OutputError(refused_);
    const auto* in = static_cast<const char*>(source);
    for (std::int64_t done = 0; done < bytes;) {
      const int count = static_cast<int>(std::min(piece_bytes_, bytes - done));
      MPI_Status status;
      BLOCKMM_MPI_CHECK_AS(MPI_File_write_at(file_, offset + done, in + done, count, MPI_BYTE, &status),
                           ExitCode::output_failure, shown_ + ": write failed at byte " + std::to_string(offset + done));
      int put = 0;
      BLOCKMM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &put));
      if (put <= 0) throw OutputError(shown_ + ": write made no progress at byte " + std::to_string(offset + done));
      done += put;
    }
  }
  void sync_and_close() override {
    if (!device_) BLOCKMM_MPI_CHECK_AS(MPI_File_sync(file_), ExitCode::output_failure, shown_ + ": MPI_File_sync failed");
    BLOCKMM_MPI_CHECK_AS(MPI_File_close(&file_), ExitCode::output_failure, shown_ + ": MPI_File_close failed");
    file_ = MPI_FILE_NULL;
    if (!refused_.empty()) throw OutputError(refused_);
  }

 private:
  std::string shown_;
  std::int64_t piece_bytes_;
  MPI_File file_ = MPI_FILE_NULL;
  bool device_ = false;
  std::string refused_;
};

}  // namespace

namespace {

bool use_mpi_io(const comm::Communicator& comm) {
  return comm.uses_mpi() && comm.file_access() == comm::FileAccess::mpi_io;
}

}  // namespace

bool writes_through_mpi_io(const comm::Communicator& comm) { return use_mpi_io(comm); }

std::unique_ptr<FileReader> open_reader(const std::string& path, const comm::Communicator& comm) {
  if (use_mpi_io(comm)) return std::make_unique<MpiReader>(path, comm.piece_bytes());
  return std::make_unique<PosixReader>(path);
}

std::unique_ptr<FileWriter> open_writer(const std::string& path, const std::string& shown_name,
                                        const comm::Communicator& comm) {
  if (use_mpi_io(comm)) return std::make_unique<MpiWriter>(path, shown_name, comm.piece_bytes());
  return std::make_unique<PosixWriter>(path, shown_name);
}

namespace {

std::string replaced_text(const std::string& path, const std::string& shown) {
  return shown + ": the temporary file " + path +
         " was replaced by another file or link while blockmm ran; nothing was written through it";
}

MapChoice map_choice(int fd, const WritePolicy& policy, bool hdf5) {
  MapChoice choice;
  choice.pwrite_forced = policy.pwrite_only;
  choice.threads_forced = policy.threads_forced;
  choice.tmpfs = on_tmpfs(fd);
  choice.huge = policy.huge && huge_folios_possible(fd);
  choice.hdf5 = hdf5;
  choice.threads = policy.threads;
  return choice;
}

// Takes `fd`: a mapped writer when `map_bytes` were reserved and the file maps, else pwrite.
std::unique_ptr<FileWriter> posix_or_mapped_writer(int fd, const std::string& shown, std::int64_t map_bytes,
                                                   const WritePolicy& policy, bool hdf5) {
  auto plain = std::make_unique<PosixWriter>(fd, shown);  // owns fd until a mapped writer does
  if (map_bytes <= 0 || !maps_output(map_choice(fd, policy, hdf5))) return plain;
  std::unique_ptr<FileWriter> mapped = make_mapped_writer(fd, map_bytes, policy.threads, shown, policy.huge);
  if (mapped == nullptr) return plain;
  plain->release();
  return mapped;
}

[[noreturn]] void not_the_temporary(const std::string& path, const std::string& shown) {
  throw OutputError(replaced_text(path, shown));
}

// The name still holds the regular file `inode` (device numbers differ between nodes).
bool names_file(const std::string& path, std::uint64_t inode) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_ino) == inode;
}

}  // namespace

std::unique_ptr<FileWriter> open_temporary_writer(const std::string& path, const std::string& shown_name,
                                                  const comm::Communicator& comm, int held, std::uint64_t device,
                                                  std::uint64_t inode, std::int64_t map_bytes,
                                                  const WritePolicy& policy, bool hdf5) {
  if (use_mpi_io(comm)) {
    // MPI-IO opens by name on every node and cannot refuse links: check the name before and
    // after. (A swap in between is still caught by the commit's check on rank 0.) The open is
    // collective, so every rank opens whatever it found; a rank that found another file never
    // writes, and its error reaches the others at the phase's end.
    const bool before = names_file(path, inode);
    auto writer = std::make_unique<MpiWriter>(path, shown_name, comm.piece_bytes());
    if (!before || !names_file(path, inode)) writer->refuse(replaced_text(path, shown_name));
    return writer;
  }
  if (held >= 0) {
    const int fd = ::fcntl(held, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw OutputError(shown_name + ": cannot duplicate the descriptor of " + path + ": " + std::strerror(errno));
    return posix_or_mapped_writer(fd, shown_name, map_bytes, policy, hdf5);
  }
  // O_NONBLOCK: a FIFO put in its place must not block the open. O_RDWR: a shared map needs it.
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENXIO) not_the_temporary(path, shown_name);
    throw OutputError(shown_name + ": cannot open the temporary file " + path + ": " + std::strerror(errno));
  }
  {
    PosixWriter closes_on_error(fd, shown_name);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_dev) != device ||
        static_cast<std::uint64_t>(st.st_ino) != inode)
      not_the_temporary(path, shown_name);
    closes_on_error.release();
  }
  return posix_or_mapped_writer(fd, shown_name, map_bytes, policy, hdf5);
}

bool will_map(int fd, const WritePolicy& policy, bool hdf5) { return maps_output(map_choice(fd, policy, hdf5)); }

bool FileWriter::write_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                              const std::vector<FieldCopy>& fields, const RecordCheck& check) {
  // Records in pieces whose staged fields stay in a core's cache (each record read once), every
  // field of a piece split out by one pass, then each field's piece written at its place: the
  // write's copy reads the staging from the cache, so the split costs about what the copy does.
  std::int64_t field_bytes = 0;
  for (const FieldCopy& field : fields) field_bytes += field.bytes;
  if (field_bytes <= 0) return true;
  const std::int64_t per_piece = std::max<std::int64_t>(1, kStagingBytes / field_bytes);
  std::vector<std::vector<std::byte>> staging(fields.size());
  std::vector<std::byte*> out(fields.size());
  std::vector<std::byte> keys(check != nullptr ? static_cast<std::size_t>(8 * std::min(per_piece, count)) : 0);
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t c = std::min(per_piece, count - done);
    for (std::size_t f = 0; f < fields.size(); ++f) {
      staging[f].resize(static_cast<std::size_t>(c * fields[f].bytes));
      out[f] = staging[f].data();
    }
    scatter_fields(records + done * stride, c, stride, fields, out.data(), check != nullptr ? keys.data() : nullptr);
    if (check != nullptr && !check(done, c, keys.data())) return false;
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (fields[f].bytes > 0) write_at(fields[f].file_offset + done * fields[f].bytes, staging[f].data(), c * fields[f].bytes);
    done += c;
  }
  return true;
}

void read_fully(int fd, std::int64_t offset, void* destination, std::int64_t bytes, const std::string& path) {
  auto* out = static_cast<char*>(destination);
  for (std::int64_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd, out + done, static_cast<std::size_t>(std::min(kPiece, bytes - done)), offset + done);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(path + ": read failed at byte " + std::to_string(offset + done) + ": " + std::strerror(errno));
    }
    if (got == 0)
      throw InputError(path + ": unexpected end of file at byte " + std::to_string(offset + done) +
                       " (the file changed while being read?)");
    done += got;
  }
}

void write_fully(int fd, std::int64_t offset, const void* source, std::int64_t bytes, const std::string& path) {
  const auto* in = static_cast<const char*>(source);
  for (std::int64_t done = 0; done < bytes;) {
    const ssize_t put = ::pwrite(fd, in + done, static_cast<std::size_t>(std::min(kPiece, bytes - done)), offset + done);
    if (put < 0) {
      if (errno == EINTR) continue;
      throw OutputError(path + ": write failed at byte " + std::to_string(offset + done) + ": " + std::strerror(errno));
    }
    done += put;
  }
}

void flush_standard_output(const std::string& note) {
  errno = 0;
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return;
  // The failed write's errno may be gone (the stream can fail inside a library's flush, followed
  // by other calls): the stream is broken anyway, so one more byte asks the system why.
  int reason = errno;
  if (reason == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) reason = errno;
  throw OutputError(std::string("standard output: cannot write: ") + (reason != 0 ? std::strerror(reason) : "write error") +
                    note);
}

}  // namespace blockmm::io
