// The split copy of an HDF5 output: each output record (int32 i, int32 j, m*m values) holds the
// block-column that goes to /indices and the values that go to /data, two arrays of the file.
// One pass over the records copies both, with copies of fixed size for the record widths blockmm
// writes (a library call a record and field would cost more than the copy at m <= 8), so that the
// split copy runs near memcpy's speed: the .h5 writers' one copy, as the .bin writers' memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/file_access.hpp"

namespace blockmm::io {

// Field f of records [0, count) (each `stride` bytes) to out[f] + t * fields[f].bytes for record
// t; fields[f].file_offset is not used. The destinations must not overlap the records. Where
// `keys` is given, each record's first 8 bytes (its block-row and block-column) go to keys + 8 t
// as well: a checker then reads them from one small array in the core's cache.
void scatter_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                    const std::vector<FieldCopy>& fields, std::byte* const* out, std::byte* keys = nullptr);

}  // namespace blockmm::io
