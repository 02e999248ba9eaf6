// io/field_scatter: records of every width blockmm writes (uint16 and uint32 values, m = 1 to 33:
// the fixed-size copies and the general one), at any byte alignment and count, split into their
// block-columns, values and keys exactly as a byte-by-byte copy does; any other layout of fields
// through the general copy.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "io/field_scatter.hpp"

namespace blockmm::io {
namespace {

// Splits `count` random records of `stride` bytes (at byte `misalign` of their buffer) with
// scatter_fields and checks every byte of every output against the records.
void check_split(const std::vector<FieldCopy>& fields, std::int64_t stride, std::int64_t count, std::size_t misalign,
                 bool keys, std::mt19937_64& rng) {
  std::vector<std::byte> buffer(misalign + static_cast<std::size_t>(stride * count) + 1);
  for (std::byte& b : buffer) b = static_cast<std::byte>(rng());
  const std::byte* records = buffer.data() + misalign;
  std::vector<std::vector<std::byte>> out(fields.size());
  std::vector<std::byte*> to(fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) {
    out[f].assign(static_cast<std::size_t>(fields[f].bytes * count) + 3, std::byte{0x5a});
    to[f] = out[f].data() + 1;  // unaligned destinations too
  }
  std::vector<std::byte> key_bytes(static_cast<std::size_t>(8 * count) + 1, std::byte{0x5a});
  scatter_fields(records, count, stride, fields, to.data(), keys ? key_bytes.data() : nullptr);
  for (std::int64_t t = 0; t < count; ++t) {
    for (std::size_t f = 0; f < fields.size(); ++f)
      for (std::int64_t b = 0; b < fields[f].bytes; ++b)
        ASSERT_EQ(to[f][t * fields[f].bytes + b], records[t * stride + fields[f].record_offset + b])
            << "record " << t << ", field " << f << ", byte " << b;
    for (std::int64_t b = 0; keys && b < 8; ++b) ASSERT_EQ(key_bytes[static_cast<std::size_t>(8 * t + b)], records[t * stride + b]);
  }
  for (std::size_t f = 0; f < fields.size(); ++f) {
    EXPECT_EQ(out[f].front(), std::byte{0x5a}) << "field " << f << " written before its place";
    EXPECT_EQ(out[f][static_cast<std::size_t>(fields[f].bytes * count) + 1], std::byte{0x5a}) << "field " << f << " overran";
  }
  EXPECT_EQ(key_bytes.back(), std::byte{0x5a}) << "keys overran";
}

TEST(FieldScatter, EveryRecordWidthSplitsAsAByteCopyDoes) {
  std::mt19937_64 rng(31);
  for (const std::int64_t width : {2, 4})
    for (std::int64_t m = 1; m <= 33; ++m) {
      const std::int64_t values = width * m * m;
      SCOPED_TRACE("width " + std::to_string(width) + ", m " + std::to_string(m));
      for (const std::int64_t count : {0, 1, 7, 129})
        for (const bool keys : {false, true})
          check_split({{4, 4, 0}, {8, values, 0}}, 8 + values, count, static_cast<std::size_t>(rng() % 8), keys, rng);
    }
}

TEST(FieldScatter, OtherLayoutsTakeTheGeneralCopy) {
  std::mt19937_64 rng(32);
  check_split({{0, 2, 0}, {5, 3, 0}, {9, 7, 0}}, 20, 50, 3, true, rng);
  check_split({{4, 4, 0}, {8, 0, 0}}, 8, 20, 1, true, rng);  // values of no bytes
  check_split({{8, 64, 0}}, 72, 40, 0, false, rng);
}

}  // namespace
}  // namespace blockmm::io
