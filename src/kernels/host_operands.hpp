// Operands and patterns held in host memory: what the cpu and reference backends build and
// consume. The build itself is operands::build_block_matrix (a layer below the kernels).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "operands/host_build.hpp"
#include "operands/packed_rows.hpp"

namespace blockmm::kernels {

// A host operand: a matrix of its own, or (a right operand only) block-rows held in memory that
// `storage` keeps alive, such as the copy that the ranks of a node share.
class HostOperand final : public Operand {
 public:
  explicit HostOperand(BlockMatrix matrix) : matrix_(std::move(matrix)), rows_(matrix_) {}
  HostOperand(BlockRowsView rows, std::shared_ptr<const void> storage) : rows_(rows), storage_(std::move(storage)) {}
  HostOperand(const HostOperand&) = delete;  // rows_ may point into matrix_
  HostOperand& operator=(const HostOperand&) = delete;
  std::int64_t blocks() const override { return rows_.blocks(); }
  // The matrix itself (owned operands only: a shared one, held by `storage`, has no BlockMatrix).
  const BlockMatrix& matrix() const {
    if (storage_) throw Error(ExitCode::other, "internal error: a shared operand used as a left operand");
    return matrix_;
  }
  const BlockRowsView& rows() const { return rows_; }

 private:
  BlockMatrix matrix_;
  BlockRowsView rows_;
  std::shared_ptr<const void> storage_;  // set for rows held elsewhere
};

class HostPattern final : public ProductPattern {
 public:
  explicit HostPattern(TilePattern pattern) : pattern_(std::move(pattern)) {
    layout_.row_begin = pattern_.row_begin;
    layout_.row_end = pattern_.row_end;
    layout_.row_ptr = pattern_.row_ptr;
  }
  const TilePattern& pattern() const { return pattern_; }

 private:
  TilePattern pattern_;
};

// The host build of an operand from any record source (no CSC: the host kernels read B by rows).
inline std::unique_ptr<Operand> build_host_operand(RecordSource& records, const OperandSpec& spec) {
  return std::make_unique<HostOperand>(
      operands::build_block_matrix(records, spec.row_begin, spec.row_end, spec.role, spec.duplicate_message, false));
}

// The host form behind an operand or pattern that a host backend made; anything else is a
// programming error (operands never move between backends).
inline const HostOperand& host_operand(const Operand& operand) {
  const auto* host = dynamic_cast<const HostOperand*>(&operand);
  if (host == nullptr) throw Error(ExitCode::other, "internal error: an operand built by another backend");
  return *host;
}
inline const BlockMatrix& host_matrix(const Operand& operand) { return host_operand(operand).matrix(); }
inline const BlockRowsView& host_rows(const Operand& operand) { return host_operand(operand).rows(); }
inline const TilePattern& host_pattern(const ProductPattern& pattern) {
  const auto* host = dynamic_cast<const HostPattern*>(&pattern);
  if (host == nullptr) throw Error(ExitCode::other, "internal error: a pattern made by another backend");
  return host->pattern();
}

// A backend that computes in host memory: it builds with the host build and counts block products
// on the host CSR; its subclasses supply the two phases over host operands.
class HostBackend : public Backend {
 public:
  std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) override {
    counters_.bytes_built += records.size() * records.stride();
    return build_host_operand(records, spec);
  }
  std::int64_t block_products(const Operand& a, const Operand& b) override {
    return operands::count_block_products(host_matrix(a), host_rows(b));
  }
  std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) override {
    return std::make_unique<HostPattern>(symbolic({host_matrix(a), host_rows(b)}));
  }
  NumericReport numeric(const Operand& a, const Operand& b, const ProductPattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    return numeric({host_matrix(a), host_rows(b)}, host_pattern(pattern), sink, options);
  }
  std::vector<std::int64_t> row_products(const Operand& a, const Operand& b) override {
    return operands::count_row_products(host_matrix(a), host_rows(b));
  }
  std::unique_ptr<Operand> slice_rows(const Operand& a, std::int32_t row_begin, std::int32_t row_end) override {
    return std::make_unique<HostOperand>(operands::slice_rows(host_matrix(a), row_begin, row_end));
  }
  std::unique_ptr<Operand> copy_operand(const Operand& source) override {
    BlockMatrix copy = operands::copy_rows(host_rows(source));
    counters_.bytes_from_peers += operands::matrix_bytes(copy);
    return std::make_unique<HostOperand>(std::move(copy));
  }
  std::int64_t operand_bytes(const RecordSource& records, const OperandSpec& spec) const override {
    return operands::build_bytes(records.shape(), records.size(), spec.row_end - spec.row_begin);
  }
  std::int64_t packed_bytes(const Operand& b) const override { return operands::packed_bytes(host_rows(b)); }
  void pack(const Operand& b, std::byte* to) const override { operands::pack_rows(host_rows(b), to); }
  std::unique_ptr<Operand> unpack(const std::byte* packed, std::int64_t bytes, std::shared_ptr<const void> storage) override {
    return std::make_unique<HostOperand>(operands::packed_rows_view(packed, bytes), std::move(storage));
  }
  BackendCounters counters() const override { return counters_; }
  void begin_product() override { counters_ = {}; }

 protected:
  virtual TilePattern symbolic(const Operands& operands) = 0;
  virtual NumericReport numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                                const NumericOptions& options) = 0;

 private:
  BackendCounters counters_;
};

}  // namespace blockmm::kernels
