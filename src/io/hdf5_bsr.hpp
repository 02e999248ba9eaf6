// The HDF5 BSR layout (docs/formats.md, "HDF5"), the one scipy.sparse.bsr_matrix takes:
//   /          attributes format = "blockmm-bsr", version = 1, n, m, nnzb (int64)
//   /indptr    int64  [p + 1]     block-row pointers
//   /indices   int32  [nnzb]      block-columns, strictly ascending within a row
//   /data      uint32 [nnzb, m, m] (uint16 for inputs)
// One validating reader and one writer serve the product writer, the input reader and
// blockmm-convert. HDF5's headers stay inside the .cpp files.
//
// Writing: one process creates the file with HDF5 (attributes and contiguous datasets, their
// space allocated at creation and never filled), closes it, and reports each dataset's byte
// offset in the file. The raw contents are then plain little-endian arrays at known offsets, so
// every rank writes its own part straight into them (POSIX or MPI-IO, as the binary format
// does), as the chunks are computed: nothing is buffered or gathered, and serial and parallel
// HDF5 builds behave alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/binary_format.hpp"
#include "io/file_access.hpp"

namespace blockmm::io {

struct BsrHeader {
  std::int32_t n = 0;
  std::int32_t m = 0;
  std::int64_t nnzb = 0;
  ValueWidth width = ValueWidth::u16;  // of /data: uint16 inputs, uint32 products
  std::int32_t block_rows() const { return m > 0 ? n / m : 0; }
  std::int64_t block_values() const { return std::int64_t{m} * m; }
  std::int64_t record_bytes() const { return 8 + static_cast<std::int64_t>(width) * block_values(); }
};

enum class BsrValues { input, input_or_product };  // which /data types a reader takes

// Opens and checks a BSR file: attributes, dataset types and shapes, and the whole of indptr
// (0 first, never decreasing, nnzb last), read in bounded pieces (a chunked /indptr in chunks
// of at most 64 MiB). Block-columns are checked as blocks are read. Every
// violation is an InputError (exit 3) naming the file and the offending value.
class BsrReader {
 public:
  BsrReader(const std::string& path, BsrValues accepted);
  ~BsrReader();
  BsrReader(const BsrReader&) = delete;
  BsrReader& operator=(const BsrReader&) = delete;

  const std::string& path() const;
  const BsrHeader& header() const;
  // The p + 1 entries of /indptr, validated (for blockmm-convert: p-sized; the reader itself
  // keeps only the rows that hold blocks).
  std::vector<std::int64_t> indptr() const;

  // Blocks [first, first + count) as COL380 records of the file's value width (int32 i, int32 j,
  // m*m values), i taken from indptr. Checks each block-column: inside [0, p) and above the
  // previous one of its row, also across `first` (the block before it is read for that).
  std::vector<std::byte> read_records(std::int64_t first, std::int64_t count);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where the raw contents of a BSR file's datasets begin, in bytes from the file's start (-1 for
// an empty dataset, which has no storage).
struct BsrLayout {
  std::int64_t indptr = -1;
  std::int64_t indices = -1;
  std::int64_t data = -1;
  std::string encode() const;  // for a broadcast
  static BsrLayout decode(const std::string& text);
};

// Creates `path` (replacing its contents) with the attributes and datasets of `header`, their
// storage allocated but not written, and closes it. `shown` names the file in OutputErrors.
// Also returns the file's size, which is all metadata but for the allocated storage.
BsrLayout create_bsr_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                          std::int64_t* metadata_bytes = nullptr);

// A parted output (docs/output.md, output_parts.hpp): the main file holds /indptr and virtual
// /indices and /data whose blocks [first, first + blocks) of each part are that part file's own
// /indices and /data. Part files are named by their file name alone, in the main file's folder.
struct BsrPartSpec {
  std::string name;  // the part file's name (no folder)
  std::int64_t first = 0;
  std::int64_t blocks = 0;  // at least 1
};
// The main file: a 512-byte user block (left zero: the caller writes parts_user_block() into it),
// the attributes of create_bsr_file and parts = P, /indptr contiguous and allocated (its offset
// returned), /indices (fill value -1) and /data virtual over `parts`.
BsrLayout create_parted_bsr_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                                 const std::vector<BsrPartSpec>& parts, std::int64_t* metadata_bytes = nullptr);
// Part file `index` of `parts`: attributes format = "blockmm-bsr-part", version = 1, generation,
// part, parts, first, nnzb (its blocks) and m; /indices int32 [blocks] and /data [blocks, m, m]
// (the width of `header`) contiguous and allocated (their offsets returned).
BsrLayout create_bsr_part_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                               const std::string& generation, int index, int parts, const BsrPartSpec& part,
                               std::int64_t* metadata_bytes = nullptr);

// Writes the contents of a file made by create_bsr_file through `file` (any rank, any order of
// disjoint parts). Not thread-safe; one writer per rank.
class BsrContentWriter {
 public:
  BsrContentWriter(FileWriter& file, const BsrHeader& header, const BsrLayout& layout);
  // indptr[first_row, first_row + count).
  void write_indptr(std::int64_t first_row, const std::int64_t* values, std::int64_t count);
  // Blocks [first_block, first_block + count) from records of the header's width: their
  // block-columns into /indices and their values into /data (the records' rows are not stored),
  // through FileWriter::write_fields, which passes them to `check` first (where given): false
  // where it refused some (nothing more is written; the blocks' bytes are then undefined). For a
  // part file, blocks are numbered within the part and the header's nnzb is the part's.
  bool write_records(std::int64_t first_block, std::int64_t count, const std::byte* records,
                     const RecordCheck& check = nullptr);
  std::int64_t bytes_written() const { return written_; }

 private:
  FileWriter& file_;
  BsrHeader header_;
  BsrLayout layout_;
  std::int64_t written_ = 0;
};

}  // namespace blockmm::io
