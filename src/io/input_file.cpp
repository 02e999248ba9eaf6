#include "io/input_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "io/file_access.hpp"

namespace blockmm::io {
namespace {

constexpr ValueWidth kInputWidth = ValueWidth::u16;

class BinaryInputFile final : public InputFile {
 public:
  BinaryInputFile(const std::string& path, const comm::Communicator& comm)
      : info_(inspect_binary_explained(path, &kInputWidth)), reader_(open_reader(path, comm)) {}
  const std::string& path() const override { return info_.path; }
  const FileHeader& header() const override { return info_.header; }
  std::string format_name() const override { return "binary"; }
  InputRecords read_records(RecordRange range) override { return read_input_records(info_, *reader_, range); }
  void read_records_into(RecordRange range, std::byte* dest) override {
    if (range.count <= 0) return;
    reader_->read_at(info_.record_offset(range.first), dest, range.count * info_.record_bytes());
    validate_record_indices(info_, dest, range.first, range.count);
  }
  bool concurrent_reads() const override { return reader_->concurrent(); }
  bool readable_by_every_rank() const override { return true; }  // every rank opened the file
  std::string locate_duplicate(std::int32_t i, std::int32_t j) const override {
    return locate_duplicate_records(info_, i, j);
  }

 private:
  BinaryFileInfo info_;
  std::unique_ptr<FileReader> reader_;
};

}  // namespace

void InputFile::read_keys(RecordRange range, std::int32_t* keys) {
  // Whole records in pieces of about 256 KiB (a thread's piece stays in its cache while the keys
  // are picked out), spread over the threads where the file's reads are thread-safe. A bad record
  // is reported as one thread reading in order would: the failure of the lowest piece wins.
  const std::int64_t stride = record_bytes<std::uint16_t>(header().m);
  // (16 MiB where reads are not thread-safe, as HDF5's: each read call costs more there.)
  const std::int64_t per_piece =
      std::max<std::int64_t>(1, (concurrent_reads() ? std::int64_t{256} << 10 : std::int64_t{16} << 20) / stride);
  const std::int64_t pieces = (range.count + per_piece - 1) / per_piece;
  const int threads = concurrent_reads() && pieces > 1 ? omp_get_max_threads() : 1;
  std::mutex mutex;
  std::int64_t failed_piece = pieces;  // the lowest piece that failed, under `mutex`
  std::atomic<std::int64_t> skip_after{pieces};
  std::exception_ptr failure;
#pragma omp parallel num_threads(threads)
  {
    LargeVector<std::byte> piece;
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t c = 0; c < pieces; ++c) {
      if (c > skip_after.load(std::memory_order_relaxed)) continue;
      try {
        const std::int64_t done = c * per_piece;
        const std::int64_t count = std::min(per_piece, range.count - done);
        piece.resize(static_cast<std::size_t>(count * stride));
        read_records_into({range.first + done, count}, piece.data());
        for (std::int64_t q = 0; q < count; ++q) {
          keys[2 * (done + q)] = record_row(piece.data() + q * stride);
          keys[2 * (done + q) + 1] = record_col(piece.data() + q * stride);
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (c < failed_piece) {
          failed_piece = c;
          failure = std::current_exception();
          skip_after.store(c, std::memory_order_relaxed);
        }
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

bool has_hdf5_signature(const std::string& path) {
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) return false;
  // The superblock follows a user block, if any, whose size is 0 or a power of two from 512 up
  // (the HDF5 format's rule; libhdf5 searches the same places).
  bool found = false;
  for (off_t offset = 0; !found && offset < (off_t{1} << 40); offset = offset == 0 ? 512 : 2 * offset) {
    unsigned char head[8] = {};
    const ssize_t got = ::pread(fd, head, sizeof head, offset);
    if (got != static_cast<ssize_t>(sizeof head)) break;
    found = std::memcmp(head, signature, sizeof head) == 0;
  }
  ::close(fd);
  return found;
}

void explain_foreign_format(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  char head[14] = {};
  const ssize_t got = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (got == static_cast<ssize_t>(sizeof head) && std::memcmp(head, "%%MatrixMarket", sizeof head) == 0)
    throw InputError(path + ": a Matrix Market file; convert it first with blockmm-import --block-size M " + path +
                     " OUT.bin");
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0)
    throw InputError(path + ": a zip archive such as scipy's .npz; convert a scipy.sparse .npz first with "
                     "blockmm-import --block-size M " + path + " OUT.bin");
}

BinaryFileInfo inspect_binary_explained(const std::string& path, const ValueWidth* width) {
  try {
    return width != nullptr ? inspect_binary(path, *width) : inspect_binary_any_width(path);
  } catch (const InputError&) {
    explain_foreign_format(path);
    throw;
  }
}

std::unique_ptr<InputFile> open_input(const std::string& path, const comm::Communicator& comm) {
  if (has_hdf5_signature(path)) {
    std::unique_ptr<InputFile> file = open_hdf5_input(path, comm);
    check_supported_block_order(path, file->header().m);  // the binary reader checks it with the header
    return file;
  }
  return std::make_unique<BinaryInputFile>(path, comm);
}

void check_same_shape(const InputFile& a, const InputFile& b) {
  if (a.header().shape() != b.header().shape())
    throw InputError(b.path() + ": n = " + std::to_string(b.header().n) + ", m = " + std::to_string(b.header().m) +
                     " does not match " + a.path() + " (n = " + std::to_string(a.header().n) +
                     ", m = " + std::to_string(a.header().m) + ")");
}

}  // namespace blockmm::io
