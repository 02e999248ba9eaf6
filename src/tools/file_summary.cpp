#include "tools/file_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "tools/block_index.hpp"

namespace blockmm::tools {
namespace {

struct ValueScan {
  std::int64_t zero_blocks = 0;
  std::uint32_t low = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t high = 0;
};

// One pass over every value, the width fixed at compile time (files run to billions of values).
template <typename Value>
ValueScan scan_values(const MappedFile& file) {
  const std::int64_t values = file.values_per_block();
  std::int64_t zero_blocks = 0;
  Value low = std::numeric_limits<Value>::max(), high = 0;
#pragma omp parallel for schedule(static) reduction(+ : zero_blocks) reduction(min : low) reduction(max : high)
  for (std::int64_t r = 0; r < file.records(); ++r) {
    const std::byte* at = file.record(r) + 8;
    Value any = 0;
    for (std::int64_t e = 0; e < values; ++e) {
      Value v;
      std::memcpy(&v, at + e * static_cast<std::int64_t>(sizeof(Value)), sizeof(Value));
      any |= v;
      low = std::min(low, v);
      high = std::max(high, v);
    }
    zero_blocks += any == 0;
  }
  return {zero_blocks, low, high};
}

}  // namespace

FileSummary summarize_file(const MappedFile& file) {
  FileSummary s;
  const io::BinaryFileInfo& info = file.info();
  s.path = info.path;
  s.format = file.format_name();
  s.file_bytes = info.file_bytes;
  s.n = info.header.n;
  s.m = info.header.m;
  s.k = info.header.k;
  s.block_rows = file.block_rows();
  s.value_bytes = s.k > 0 ? file.value_bytes() : 0;
  s.record_bytes = info.record_bytes();

  const BlockIndex index(file);
  s.sorted = index.sorted();
  s.first_unsorted = index.first_unsorted();
  s.duplicates = index.duplicates();

  const ValueScan scan = file.value_bytes() == 2 ? scan_values<std::uint16_t>(file) : scan_values<std::uint32_t>(file);
  s.zero_blocks = scan.zero_blocks;
  s.has_values = s.k > 0;
  s.min_value = s.has_values ? scan.low : 0;
  s.max_value = scan.high;

  // Over the rows that hold records (the index lists no others): memory follows the records, not n.
  s.empty_rows = s.block_rows - index.rows();
  s.row_min = s.empty_rows > 0 ? 0 : std::numeric_limits<std::int64_t>::max();
  for (std::int64_t x = 0; x < index.rows(); ++x) {
    const std::int64_t count = index.row_end(x) - index.row_begin(x);
    s.row_min = std::min(s.row_min, count);
    s.row_max = std::max(s.row_max, count);
  }
  s.row_mean = static_cast<double>(s.k) / s.block_rows;
  return s;
}

namespace {

const char* kind(const FileSummary& s) {
  return s.value_bytes == 2 ? "input (uint16 values)" : s.value_bytes == 4 ? "product (uint32 values)"
                                                                            : "empty (k = 0: either width)";
}

}  // namespace

std::string summary_text(const FileSummary& s) {
  const double p = s.block_rows;
  char buffer[2048];
  std::string text;
  // The name apart from the fixed-size buffer (a path may be PATH_MAX long), its control
  // characters escaped: one line whatever the name holds.
  text += "file:            " + escape_control_characters(s.path) + "\n";
  std::snprintf(buffer, sizeof buffer,
                "format:          %s\n"
                "size:            %lld bytes\n"
                "header:          n = %d, m = %d, k = %lld (%d block-rows, density %.6g)\n"
                "values:          %s, %lld bytes a record\n",
                s.format == "hdf5" ? "HDF5 (BSR layout; records in /data order)" : "COL380 binary",
                static_cast<long long>(s.file_bytes), s.n, s.m, static_cast<long long>(s.k),
                s.block_rows, static_cast<double>(s.k) / (p * p), kind(s), static_cast<long long>(s.record_bytes));
  text += buffer;
  if (s.sorted) {
    text += "sorted:          yes (row-major)\n";
  } else {
    text += "sorted:          no (record " + std::to_string(s.first_unsorted) + " is the first out of order)\n";
  }
  text += "duplicates:      " + std::to_string(s.duplicates) + "\n";
  text += "all-zero blocks: " + std::to_string(s.zero_blocks) + "\n";
  if (s.has_values) {
    text += "value range:     " + std::to_string(s.min_value) + " .. " + std::to_string(s.max_value) + "\n";
  } else {
    text += "value range:     (no records)\n";
  }
  std::snprintf(buffer, sizeof buffer, "blocks per row:  min %lld, mean %.4g, max %lld (%lld empty rows)\n",
                static_cast<long long>(s.row_min), s.row_mean, static_cast<long long>(s.row_max),
                static_cast<long long>(s.empty_rows));
  text += buffer;
  return text;
}

std::string summary_json(const FileSummary& s) {
  nlohmann::json j;
  j["path"] = json_text(s.path);  // names are bytes; the JSON text must be UTF-8
  j["format"] = s.format;
  j["file_bytes"] = s.file_bytes;
  j["n"] = s.n;
  j["m"] = s.m;
  j["k"] = s.k;
  j["block_rows"] = s.block_rows;
  j["density"] = static_cast<double>(s.k) / (static_cast<double>(s.block_rows) * s.block_rows);
  j["value_bytes"] = s.value_bytes == 0 ? nlohmann::json() : nlohmann::json(s.value_bytes);
  j["value_type"] = s.value_bytes == 2 ? "uint16" : s.value_bytes == 4 ? "uint32" : "unknown";
  j["record_bytes"] = s.record_bytes;
  j["sorted"] = s.sorted;
  j["first_unsorted_record"] = s.sorted ? nlohmann::json() : nlohmann::json(s.first_unsorted);
  j["duplicates"] = s.duplicates;
  j["zero_blocks"] = s.zero_blocks;
  j["min_value"] = s.has_values ? nlohmann::json(s.min_value) : nlohmann::json();
  j["max_value"] = s.has_values ? nlohmann::json(s.max_value) : nlohmann::json();
  j["blocks_per_row"] = {{"min", s.row_min}, {"mean", s.row_mean}, {"max", s.row_max}, {"empty_rows", s.empty_rows}};
  return j.dump(2);
}

}  // namespace blockmm::tools
