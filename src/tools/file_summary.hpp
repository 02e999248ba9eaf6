// blockmm-info's facts about a COL380 file: header, value width, order, duplicates, all-zero
// blocks, value range and how blocks spread over block-rows.
#pragma once

#include <cstdint>
#include <string>

#include "tools/mapped_file.hpp"

namespace blockmm::tools {

struct FileSummary {
  std::string path;
  std::string format;  // "binary" or "hdf5"
  std::int64_t file_bytes = 0;
  std::int32_t n = 0, m = 0;
  std::int64_t k = 0;
  std::int32_t block_rows = 0;
  int value_bytes = 0;  // 2 (input) or 4 (product); 0 when k = 0 leaves it open
  std::int64_t record_bytes = 0;
  bool sorted = true;                 // non-decreasing (i, j), row-major
  std::int64_t first_unsorted = -1;   // record that breaks the order
  std::int64_t duplicates = 0;        // records beyond the first of their (i, j)
  std::int64_t zero_blocks = 0;
  bool has_values = false;            // min/max are meaningful (k > 0)
  std::uint32_t min_value = 0, max_value = 0;
  std::int64_t row_min = 0, row_max = 0, empty_rows = 0;  // records per block-row
  double row_mean = 0;
};

FileSummary summarize_file(const MappedFile& file);

std::string summary_text(const FileSummary& s);
std::string summary_json(const FileSummary& s);

}  // namespace blockmm::tools
