// The part files of a parted BSR output (docs/output.md), as blockmm's own reader takes them
// (src/io only). blockmm reads exactly its own layout and never lets libhdf5 resolve a virtual
// dataset's source names: the main file's virtual /indices and /data must map, in order, blocks
// [first, first + blocks) of part k to the whole /indices and /data of "<main>.part-<g>-<k>"
// (output_parts.hpp), one generation g throughout, the one the main file's user block records;
// each part must be a regular file in the main file's own folder (no link, no other folder),
// hold the attributes and contiguous datasets create_bsr_part_file makes, and its datasets the
// same checks as any file's (no external storage, no virtual datasets, no links, every byte
// inside the file). Anything else is an InputError naming the main file and the part.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/hdf5_bsr.hpp"
#include "io/hdf5_checks.hpp"

namespace blockmm::io {

class BsrParts {
 public:
  // `indices` and `data`: the main file's datasets; `parts`: its root attribute. Opens and
  // checks every part (then closes them: they are reopened as reads need them, and a part that
  // is not the file it was is an error).
  BsrParts(const std::string& main_path, const hdf5::CheckedFile& main, hid_t indices, hid_t data,
           const BsrHeader& header, std::int64_t parts);
  ~BsrParts();
  BsrParts(const BsrParts&) = delete;
  BsrParts& operator=(const BsrParts&) = delete;

  // Blocks [first, first + count) of the whole: block-columns as int64 and, where `values` is not
  // null, values in the header's width.
  void read(std::int64_t first, std::int64_t count, std::int64_t* cols, void* values);

 private:
  struct Part {
    std::string name;
    std::int64_t first = 0;
    std::int64_t blocks = 0;
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
  };
  struct Open;

  void check_mapping(hid_t dataset, const char* name, const char* source, bool values);
  std::unique_ptr<Open> open_part(std::size_t k, bool first_time);

  std::string main_path_;
  std::string folder_;
  std::string base_;
  std::string generation_;
  BsrHeader header_;
  const hdf5::CheckedFile& main_;
  std::vector<Part> parts_;
  std::unique_ptr<Open> current_;  // the part last read
  std::size_t current_index_ = 0;
};

}  // namespace blockmm::io
