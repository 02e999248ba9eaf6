// A matrix file loaded for the inspection tools (blockmm-cmp, blockmm-info), seen as COL380
// records. A binary file: header and size checked by io::inspect_binary*, the whole file then
// read with pread(2) into memory of its own (anonymous pages for large files), block indices
// checked by io::validate_record_indices. The file is not mapped: a mapping turns a file that
// shrinks while the tool runs into SIGBUS at some later access, where reading turns it into an
// InputError at once. An HDF5 (BSR) file, told apart by its signature, is checked by
// io::BsrReader and its blocks are read into memory as records in BSR order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/large_buffer.hpp"
#include "core/record_layout.hpp"
#include "io/binary_format.hpp"

namespace blockmm::tools {

class MappedFile {
 public:
  // `info` from io::inspect_binary or io::inspect_binary_any_width. Throws InputError when the
  // file cannot be read whole (it changed size since `info`, a read failed or came up short) or
  // a block index lies outside [0, n/m); std::bad_alloc when it does not fit in memory.
  explicit MappedFile(const io::BinaryFileInfo& info);
  // Either format, by signature. `width`, when not null, is what a binary file must hold (an
  // empty binary file fits both); an HDF5 file's /data says its own. A file that is neither
  // (a Matrix Market or .npz file, say) is an InputError saying how to convert it.
  static std::unique_ptr<MappedFile> open(const std::string& path, const io::ValueWidth* width = nullptr);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const io::BinaryFileInfo& info() const { return info_; }
  const std::string& path() const { return info_.path; }
  std::int64_t records() const { return info_.header.k; }
  std::int32_t block_rows() const { return info_.header.n / info_.header.m; }
  std::int64_t values_per_block() const { return std::int64_t{info_.header.m} * info_.header.m; }
  int value_bytes() const { return static_cast<int>(info_.width); }

  const std::byte* record(std::int64_t r) const { return bytes_.data() + kHeaderBytes + r * stride_; }
  std::int32_t row(std::int64_t r) const { return record_row(record(r)); }
  std::int32_t col(std::int64_t r) const { return record_col(record(r)); }
  // Value e of record r, widened (uint16 or uint32 in the file).
  std::uint32_t value(std::int64_t r, std::int64_t e) const;
  bool all_zero(std::int64_t r) const;

  bool is_hdf5() const { return hdf5_; }
  const char* format_name() const { return is_hdf5() ? "hdf5" : "binary"; }
  // Where record r lives, for messages: "record 3 (byte offset 60)", or "block 3 of /data".
  std::string locate(std::int64_t r) const;

 private:
  MappedFile(const io::BinaryFileInfo& info, LargeVector<std::byte> records);  // HDF5, records in memory

  io::BinaryFileInfo info_;
  LargeVector<std::byte> bytes_;  // the binary file whole; for HDF5, 12 unused header bytes, then the records
  std::int64_t stride_ = 0;
  bool hdf5_ = false;
};

}  // namespace blockmm::tools
