// A COL380 file loaded for the inspection tools (blockmm-cmp, blockmm-info): header and size
// checked by io::inspect_binary*, the whole file then read with pread(2) into memory of its own
// (anonymous pages, not the heap's arenas, for large files), block indices checked by
// io::validate_record_indices, and the records read from there. The file is not mapped: a
// mapping turns a file that shrinks while the tool runs into SIGBUS at some later access, where
// reading turns it into an InputError at once (and later changes cannot reach the copy).
#pragma once

#include <cstddef>
#include <cstdint>
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

 private:
  io::BinaryFileInfo info_;
  LargeVector<std::byte> bytes_;  // the whole file
  std::int64_t stride_ = 0;
};

}  // namespace blockmm::tools
