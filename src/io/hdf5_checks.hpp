// The checks blockmm's HDF5 readers make of a file's root attributes and datasets before they
// trust them (src/io only; hdf5_bsr.cpp reads BSR files with them, hdf5_parts.cpp the part files
// of a parted output). Each failure is one InputError naming the file, never a read of whatever
// a link or another file holds.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_support.hpp"

namespace blockmm::io::hdf5 {

// Text from a file, fit for a one-line message: control and non-ASCII bytes as \xHH, and short.
std::string printable(const std::string& text);
// numpy's spelling of a shape: (5,) (2, 3) ().
std::string shape_text(const std::vector<hsize_t>& dims);
// A byte count from a file's claims (computed in double: it may pass 2^64).
std::string claimed_bytes(double bytes);

class CheckedFile {
 public:
  // `shown` prefixes every message ("C.h5", or "C.h5: part file C.h5.part-..."); the hints end
  // the messages about a missing attribute or dataset.
  CheckedFile(std::string shown, hid_t file, std::string attribute_hint, std::string dataset_hint)
      : shown_(std::move(shown)), file_(file), attribute_hint_(std::move(attribute_hint)),
        dataset_hint_(std::move(dataset_hint)) {}

  const std::string& shown() const { return shown_; }
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail_hdf5(const std::string& what) const { fail(what + error_detail()); }

  bool has_attribute(const char* name) const;
  Handle open_attribute(const char* name) const;
  std::int64_t int_attribute(const char* name) const;
  std::string string_attribute(const char* name) const;
  // The dataset `name` stored in this file under its own name: refused where it is an external,
  // soft or user-defined link, not a dataset, keeps its values in external files or (unless
  // `allow_virtual`) is a virtual dataset, before anything is read through it.
  Handle open_dataset(const char* name, bool allow_virtual = false) const;
  std::vector<hsize_t> dims_of(hid_t dataset, const char* name) const;
  // Only plain 8-, 16-, 32- or 64-bit integers: every bit of every byte significant.
  void check_plain_integer(hid_t type, const std::string& what) const;
  void check_integer_type(hid_t dataset, const char* name, const char* wanted) const;
  // A dataset's bytes must all be stored, inside the file of `file_bytes` bytes (compressed:
  // expanded at most 4096 times).
  void check_stored(hid_t dataset, const char* name, std::int64_t file_bytes) const;
  void read_hyperslab(hid_t dataset, const char* name, hid_t memory_type, const std::vector<hsize_t>& start,
                      const std::vector<hsize_t>& count, void* destination) const;

 private:
  std::string shown_;
  hid_t file_;
  std::string attribute_hint_;
  std::string dataset_hint_;
};

}  // namespace blockmm::io::hdf5
