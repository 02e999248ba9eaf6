// Where a backend's operands come from: the records one rank must multiply (its A rows, the B
// rows its panel needs), with what the build must know about them. A source hands records out
// in pieces, so that a GPU backend can read them into pinned buffers and upload each piece while
// the next is read, or whole, for host backends that build in host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "core/block_matrix.hpp"

namespace blockmm {

enum class OperandRole {
  left,   // A: masks of non-zero columns; CSR only
  right,  // B: masks of non-zero rows; CSR and CSC
  plain,  // masks and CSC skipped (ownership checks, tools)
};

// Gives the text of the error for a duplicate block (i, j), e.g. naming the file and records.
using DuplicateMessage = std::function<std::string(std::int32_t i, std::int32_t j)>;

// What an operand is: the block-rows it covers (every record's row lies in [row_begin,
// row_end)), its role, and how to name a duplicate block.
struct OperandSpec {
  std::int32_t row_begin = 0;
  std::int32_t row_end = 0;
  OperandRole role = OperandRole::left;
  DuplicateMessage duplicate_message;
  // A left operand that a GPU's memory cannot hold beside the rest: its blocks stay in pinned
  // host memory, which the GPU's kernels read in place (backends without a device ignore it).
  bool in_host_memory = false;
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  virtual MatrixShape shape() const = 0;
  virtual std::int64_t size() const = 0;  // records
  std::int64_t stride() const { return record_bytes<std::uint16_t>(shape().m); }
  // Copies records [first, first + count), validated, into dest (count * stride() bytes). Safe
  // to call from several threads at once.
  virtual void read(std::int64_t first, std::int64_t count, std::byte* dest) const = 0;
  // Whether read() may be called from several threads at once.
  virtual bool concurrent() const { return true; }
  // All records in host memory; moved out where the source already holds them. Call once.
  virtual InputRecords take() = 0;
  // Whether take() moves records the source already holds (no read, no copy): a build then
  // takes them rather than reading them in pieces.
  virtual bool in_memory() const { return false; }
};

// Records already in memory (received from other ranks, or made by a test).
class MemoryRecordSource final : public RecordSource {
 public:
  explicit MemoryRecordSource(InputRecords records) : records_(std::move(records)) {}
  MatrixShape shape() const override { return records_.shape; }
  std::int64_t size() const override { return records_.size(); }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    if (count > 0) std::memcpy(dest, records_.record(first), static_cast<std::size_t>(count * stride()));
  }
  InputRecords take() override { return std::move(records_); }
  bool in_memory() const override { return true; }

 private:
  InputRecords records_;
};

}  // namespace blockmm
