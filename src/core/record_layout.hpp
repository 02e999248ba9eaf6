// The COL380 record: int32 block-row, int32 block-col, then m*m values row-major (uint16 in
// inputs, uint32 in outputs). It is the unit read from files, exchanged between ranks and
// written by the kernels, so one description of it serves every module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace blockmm {

constexpr std::int64_t kHeaderBytes = 12;  // int32 n, m, k
// The largest block order whose output record (8 + 4 m^2 bytes) has a size that int64 holds; the
// readers refuse larger m (only a file without blocks could claim one).
constexpr std::int32_t kMaxBlockOrder = 1518500249;
// The largest block order blockmm multiplies: every index within a block, r * m + c, and the
// count of a block's values fit int32 (46340^2 < 2^31 <= 46341^2), so a block of uint16 values
// stays below 4 GiB. The readers refuse larger m with a message naming this limit.
constexpr std::int32_t kMaxSupportedBlockOrder = 46340;

struct MatrixShape {
  std::int32_t n = 0;  // order of the (square) matrix
  std::int32_t m = 0;  // order of one block
  std::int32_t block_rows() const { return m > 0 ? n / m : 0; }
  std::int64_t block_values() const { return std::int64_t{m} * m; }
  friend bool operator==(MatrixShape x, MatrixShape y) { return x.n == y.n && x.m == y.m; }
  friend bool operator!=(MatrixShape x, MatrixShape y) { return !(x == y); }
};

template <typename Value>
constexpr std::int64_t record_bytes(std::int32_t m) {
  return 8 + static_cast<std::int64_t>(sizeof(Value)) * m * m;
}

// Records may sit at any byte offset (for odd m, 2*m*m + 8 is not a multiple of 4), so the
// indices are read and written through memcpy.
inline std::int32_t record_row(const std::byte* record) {
  std::int32_t v;
  std::memcpy(&v, record, 4);
  return v;
}
inline std::int32_t record_col(const std::byte* record) {
  std::int32_t v;
  std::memcpy(&v, record + 4, 4);
  return v;
}
inline void set_record_index(std::byte* record, std::int32_t row, std::int32_t col) {
  std::memcpy(record, &row, 4);
  std::memcpy(record + 4, &col, 4);
}

// A header's three int32 fields; k is widened so that checks on it cannot overflow.
struct FileHeader {
  std::int32_t n = 0;
  std::int32_t m = 0;
  std::int64_t k = 0;
  MatrixShape shape() const { return {n, m}; }
};

}  // namespace blockmm
