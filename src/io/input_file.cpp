#include "io/input_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "core/error.hpp"
#include "io/file_access.hpp"

namespace blockmm::io {
namespace {

class BinaryInputFile final : public InputFile {
 public:
  BinaryInputFile(const std::string& path, const comm::Communicator& comm)
      : info_(inspect_binary(path, ValueWidth::u16)), reader_(open_reader(path, comm)) {}
  const std::string& path() const override { return info_.path; }
  const FileHeader& header() const override { return info_.header; }
  std::string format_name() const override { return "binary"; }
  InputRecords read_records(RecordRange range) override { return read_input_records(info_, *reader_, range); }
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
  unsigned char head[8] = {};
  const ssize_t got = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  return got == static_cast<ssize_t>(sizeof head) && std::memcmp(head, signature, sizeof head) == 0;
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
