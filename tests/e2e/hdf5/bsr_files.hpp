// BSR files read and crafted with the HDF5 C API directly, never through src/io, so that the hdf5
// suite's checks share no code with what they check: a file's contents read back (read_bsr), the
// arrays blockmm must write for given records (expected_bsr), and files crafted defects included
// (Craft, write_craft).
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/harness.hpp"

namespace blockmm::e2e {

// An HDF5 identifier, closed by `close` at the end of its scope.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// A BSR file's contents, values widened to uint32.
struct Bsr {
  std::string format;
  std::map<std::string, std::int64_t> ints;  // version, n, m, nnzb
  std::size_t value_bytes = 0;               // 2 or 4
  std::vector<std::int64_t> indptr;
  std::vector<std::int32_t> indices;
  std::vector<std::uint32_t> data;
  std::vector<hsize_t> data_dims;
  bool operator==(const Bsr& o) const {
    return format == o.format && ints == o.ints && value_bytes == o.value_bytes && indptr == o.indptr &&
           indices == o.indices && data == o.data && data_dims == o.data_dims;
  }
};

// The BSR arrays of `records` (any order), as blockmm must write them.
template <typename Value>
Bsr expected_bsr(const RecordBuffer<Value>& records) {
  const std::int32_t n = records.shape.n;
  const std::int32_t m = records.shape.m;
  const std::int32_t p = n / m;
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
    return std::make_pair(record_row(records.record(x)), record_col(records.record(x))) <
           std::make_pair(record_row(records.record(y)), record_col(records.record(y)));
  });
  Bsr bsr;
  bsr.format = "blockmm-bsr";
  const std::int64_t k = records.size();
  bsr.ints = {{"version", 1}, {"n", n}, {"m", m}, {"nnzb", k}};
  bsr.value_bytes = sizeof(Value);
  bsr.indptr.assign(static_cast<std::size_t>(p) + 1, 0);
  bsr.data_dims = {static_cast<hsize_t>(k), static_cast<hsize_t>(m), static_cast<hsize_t>(m)};
  for (std::int64_t q : order) {
    const std::byte* rec = records.record(q);
    ++bsr.indptr[static_cast<std::size_t>(record_row(rec)) + 1];
    bsr.indices.push_back(record_col(rec));
    for (std::int64_t e = 0; e < std::int64_t{m} * m; ++e) {
      Value v;
      std::memcpy(&v, rec + 8 + sizeof(Value) * e, sizeof v);
      bsr.data.push_back(v);
    }
  }
  for (std::int32_t i = 0; i < p; ++i) bsr.indptr[i + 1] += bsr.indptr[i];
  return bsr;
}

// `records` sorted by (i, j), as blockmm-convert writes an HDF5 file back to binary.
template <typename Value>
RecordBuffer<Value> sorted(const RecordBuffer<Value>& records) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
    return std::make_pair(record_row(records.record(x)), record_col(records.record(x))) <
           std::make_pair(record_row(records.record(y)), record_col(records.record(y)));
  });
  RecordBuffer<Value> out;
  out.shape = records.shape;
  out.bytes.resize(records.bytes.size());
  for (std::size_t q = 0; q < order.size(); ++q)
    std::memcpy(out.record(static_cast<std::int64_t>(q)), records.record(order[q]), static_cast<std::size_t>(records.stride()));
  return out;
}

// A BSR file to craft, defects included. Defaults make a valid input.
struct Craft {
  bool write_format = true;
  std::string format = "blockmm-bsr";
  std::map<std::string, std::int64_t> ints;  // attributes written as int64 scalars
  std::string float_attribute;               // written as a float64 instead
  std::string pair_attribute;                // written as two int64s
  std::vector<std::int64_t> indptr;
  hid_t indptr_type = H5T_STD_I64LE;
  std::vector<hsize_t> indptr_dims;  // empty: from the vector
  std::vector<std::int64_t> indices;
  hid_t indices_type = H5T_STD_I32LE;
  std::vector<hsize_t> indices_dims;
  std::vector<std::uint32_t> data;
  hid_t data_type = H5T_STD_U16LE;
  std::vector<hsize_t> data_dims;
  std::set<std::string> omit;  // datasets left out
  bool data_is_group = false;
  bool chunked_gzip = false;   // how h5py users often store arrays
  hsize_t userblock = 0;       // bytes before the superblock (H5Pset_userblock)
};

// The attributes and datasets of the BSR file at `path`, each type checked as blockmm writes it.
Bsr read_bsr(const std::string& path);

// A valid file of `records`, to add defects to.
Craft craft_from(const InputRecords& records);

// One dataset of `dims`, from `values` in `memory_type`; chunked and deflated where asked.
void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t memory_type, std::vector<hsize_t> dims,
                   const void* values, bool chunked_gzip);

// Writes `c` to `path`, its defects included.
void write_craft(const std::string& path, Craft c);

}  // namespace blockmm::e2e
