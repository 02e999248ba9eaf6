#include "io/input_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "core/error.hpp"
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
  std::string locate_duplicate(std::int32_t i, std::int32_t j) const override {
    return locate_duplicate_records(info_, i, j);
  }

 private:
  BinaryFileInfo info_;
  std::unique_ptr<FileReader> reader_;
};

}  // namespace

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
