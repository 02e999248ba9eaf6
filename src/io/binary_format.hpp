// The COL380 binary format: header and size rules, record validation, and whole-file reads
// and writes for tools and tests. Every violation is an InputError naming the file, the record
// (and byte offset) and the offending value (docs/formats.md, "COL380 binary").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/block_matrix.hpp"
#include "core/record_layout.hpp"

namespace blockmm::io {

enum class ValueWidth { u16 = 2, u32 = 4 };  // inputs hold uint16 values, outputs uint32

struct BinaryFileInfo {
  std::string path;
  FileHeader header;
  std::int64_t file_bytes = 0;
  ValueWidth width = ValueWidth::u16;
  std::int64_t record_bytes() const { return 8 + static_cast<std::int64_t>(width) * header.m * header.m; }
  std::int64_t record_offset(std::int64_t r) const { return kHeaderBytes + r * record_bytes(); }
};

// Opens `path`, reads the header and checks it and the file size: n > 0, m > 0, m divides n,
// 0 <= k <= (n/m)^2, size == 12 + k * (8 + width * m^2), then m <= 46340. Nothing is allocated from the header.
BinaryFileInfo inspect_binary(const std::string& path, ValueWidth width);

// The header of `path` where it is a regular file that starts with a plausible COL380 header
// (n, m > 0, m divides n, k >= 0; the file's size unchecked), else none: for decisions taken
// before the inputs are opened and checked (driver/backend_choice.hpp).
std::optional<FileHeader> peek_binary_header(const std::string& path);

// Throws InputError naming `path` when m exceeds kMaxSupportedBlockOrder (46340), for both formats.
void check_supported_block_order(const std::string& path, std::int32_t m);

// Which width fits the file's size, for tools that accept both inputs and outputs; throws when neither does.
BinaryFileInfo inspect_binary_any_width(const std::string& path);

// Block indices of records [first_record, first_record + count) in `bytes` must lie in [0, p).
void validate_record_indices(const BinaryFileInfo& file, const std::byte* bytes, std::int64_t first_record,
                             std::int64_t count);

class FileReader;

// Rank `rank` of `ranks` reads records [first, first + count) of a file: near-equal shares.
struct RecordRange {
  std::int64_t first = 0;
  std::int64_t count = 0;
};
RecordRange record_share(std::int64_t records, int rank, int ranks);

// Reads records [range.first, range.first + range.count) through `reader` and validates their indices.
InputRecords read_input_records(const BinaryFileInfo& file, FileReader& reader, RecordRange range);

// " at records X and Y (byte offsets ...)": where block (i, j) occurs in the file, for the
// message of a duplicate found after the records were exchanged. Scans the file; error path only.
std::string locate_duplicate_records(const BinaryFileInfo& file, std::int32_t i, std::int32_t j);

// Whole-file helpers (tools, tests): read every record of a file, validated.
InputRecords read_input_file(const std::string& path);
OutputRecords read_output_file(const std::string& path);

// Writes header + records to `path` atomically (temporary file, fsync, rename).
template <typename Value>
void write_binary_file(const std::string& path, const RecordBuffer<Value>& records);

std::string describe(const FileHeader& header);

}  // namespace blockmm::io
