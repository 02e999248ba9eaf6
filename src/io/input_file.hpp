// An input matrix file, COL380 binary or HDF5 (BSR layout), told apart by its signature. Each
// rank reads its own share of the blocks; every block returned has been validated.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"
#include "core/record_source.hpp"
#include "io/binary_format.hpp"

namespace blockmm::io {

class InputFile {
 public:
  virtual ~InputFile() = default;
  virtual const std::string& path() const = 0;
  virtual const FileHeader& header() const = 0;  // k = blocks stored in the file
  virtual std::string format_name() const = 0;
  // Blocks [range.first, range.first + range.count) in the file's order, as uint16 records.
  virtual InputRecords read_records(RecordRange range) = 0;
  // The same records into `dest` (range.count records of the input stride). Thread-safe where
  // concurrent_reads() says so.
  virtual void read_records_into(RecordRange range, std::byte* dest) {
    const InputRecords records = read_records(range);
    if (!records.bytes.empty()) std::memcpy(dest, records.bytes.data(), records.bytes.size());
  }
  virtual bool concurrent_reads() const { return false; }
  // Whether any rank of a node may read any record of this object, as from a file in the
  // shared page cache: then ranks all on one node take their records from it themselves
  // instead of through MPI. No by default: an object holding only this rank's share (a
  // relabelled share in memory, say) must have its records sent as bytes.
  virtual bool readable_by_every_rank() const { return false; }
  // The block-row and block-column of records [range.first, range.first + range.count),
  // validated like read_records: keys[2q] = row, keys[2q + 1] = col. What the distribution needs
  // to place records without holding their values (read in bounded pieces).
  virtual void read_keys(RecordRange range, std::int32_t* keys);
  // " at records X and Y ..." where block (i, j) occurs twice, for duplicate messages; "" if unknown.
  virtual std::string locate_duplicate(std::int32_t i, std::int32_t j) const = 0;
  // The file's block for block (i, j) as this object numbers it: the same, except where the
  // indices are compact labels (partition/relabel.hpp), so that messages name the file's block.
  virtual std::pair<std::int32_t, std::int32_t> file_block(std::int32_t i, std::int32_t j) const { return {i, j}; }
};

// A share of an input file's records as a backend's record source: read where the backend wants
// them (pinned buffers, piece by piece) instead of into host memory first.
class FileRecordSource final : public RecordSource {
 public:
  FileRecordSource(InputFile& file, RecordRange range) : file_(file), range_(range) {}
  MatrixShape shape() const override { return file_.header().shape(); }
  std::int64_t size() const override { return range_.count; }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    file_.read_records_into({range_.first + first, count}, dest);
  }
  bool concurrent() const override { return file_.concurrent_reads(); }
  InputRecords take() override { return file_.read_records(range_); }

 private:
  InputFile& file_;
  RecordRange range_;
};

// Collective under MPI. Throws InputError (exit 3) for missing, unreadable or malformed files.
std::unique_ptr<InputFile> open_input(const std::string& path, const comm::Communicator& comm);

// Whether the file starts with the HDF5 signature.
bool has_hdf5_signature(const std::string& path);

// Called when `path` failed the binary format's checks: throws an InputError saying what the
// file is instead when it starts like a Matrix Market file ("%%MatrixMarket") or a scipy .npz
// (a zip archive, "PK\3\4"), and how to convert it; returns otherwise. The signature is only
// consulted after the binary checks failed, so a valid binary file is never taken for either.
void explain_foreign_format(const std::string& path);

// inspect_binary (width given) or inspect_binary_any_width (nullptr), with explain_foreign_format.
BinaryFileInfo inspect_binary_explained(const std::string& path, const ValueWidth* width);

// A and B must have the same n and m.
void check_same_shape(const InputFile& a, const InputFile& b);

// The HDF5 reader (io/hdf5_input.cpp).
std::unique_ptr<InputFile> open_hdf5_input(const std::string& path, const comm::Communicator& comm);

}  // namespace blockmm::io
