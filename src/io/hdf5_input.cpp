// HDF5 inputs (BSR layout, uint16 values) behind the InputFile interface. Every rank opens the
// file read-only and checks its attributes, shapes and indptr; each then reads its own share of
// the blocks, whose block-columns BsrReader checks as it goes (range, order, repeats, also across
// the start of the share). Because a repeated block is a repeated index within a row, duplicates
// never get past reading, and locate_duplicate has nothing to add.
#include <memory>

#include "io/hdf5_bsr.hpp"
#include "io/input_file.hpp"

namespace blockmm::io {
namespace {

class Hdf5InputFile final : public InputFile {
 public:
  explicit Hdf5InputFile(const std::string& path) : reader_(path, BsrValues::input) {
    header_.n = reader_.header().n;
    header_.m = reader_.header().m;
    header_.k = reader_.header().nnzb;
  }
  const std::string& path() const override { return reader_.path(); }
  const FileHeader& header() const override { return header_; }
  std::string format_name() const override { return "hdf5"; }
  InputRecords read_records(RecordRange range) override {
    InputRecords records;
    records.shape = header_.shape();
    const std::vector<std::byte> bytes = reader_.read_records(range.first, range.count);
    records.bytes.assign(bytes.begin(), bytes.end());
    return records;
  }
  std::string locate_duplicate(std::int32_t, std::int32_t) const override { return ""; }
  bool readable_by_every_rank() const override { return true; }  // every rank opened the file

 private:
  BsrReader reader_;
  FileHeader header_;
};

}  // namespace

std::unique_ptr<InputFile> open_hdf5_input(const std::string& path, const comm::Communicator&) {
  return std::make_unique<Hdf5InputFile>(path);
}

}  // namespace blockmm::io
