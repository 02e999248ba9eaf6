#include "kernels/backend.hpp"

#include <map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/saturate.hpp"
#include "kernels/host_operands.hpp"

namespace blockmm::kernels {
namespace {

using TileKey = std::pair<std::int32_t, std::int32_t>;
using ExactSums = std::map<TileKey, std::vector<std::uint64_t>>;

// Every C(i,j) with at least one block pair, as exact uint64 sums (no sum can overflow: at
// most 2^31 terms below 2^32 each).
ExactSums exact_sums(const Operands& ops) {
  const std::int32_t m = ops.a.shape.m;
  const std::int64_t mm = ops.a.shape.block_values();
  ExactSums sums;
  for (std::int32_t i = ops.a.row_begin; i < ops.a.row_end; ++i) {
    const std::int64_t r = i - ops.a.row_begin;
    for (std::int64_t ab = ops.a.row_ptr[r]; ab < ops.a.row_ptr[r + 1]; ++ab) {
      const std::int32_t k = ops.a.col[ab];
      const std::int64_t kr = k - ops.b.row_begin;
      if (kr < 0 || k >= ops.b.row_end) continue;
      for (std::int64_t bb = ops.b.row_ptr[kr]; bb < ops.b.row_ptr[kr + 1]; ++bb) {
        auto& c = sums[{i, ops.b.col[bb]}];
        c.resize(mm, 0);
        const std::uint16_t* a = ops.a.block_values(ab);
        const std::uint16_t* b = ops.b.block_values(bb);
        for (std::int64_t row = 0; row < m; ++row)
          for (std::int64_t col = 0; col < m; ++col)
            for (std::int64_t l = 0; l < m; ++l) c[row * m + col] += std::uint64_t{a[row * m + l]} * b[l * m + col];
      }
    }
  }
  return sums;
}

bool all_zero(const std::vector<std::uint64_t>& v) {
  for (std::uint64_t x : v)
    if (x != 0) return false;
  return true;
}

class ReferenceBackend final : public HostBackend {
 public:
  explicit ReferenceBackend(bool whole_inputs) : whole_inputs_(whole_inputs) {}
  std::string name() const override { return "reference"; }
  BackendTraits traits() const override {
    BackendTraits traits;
    traits.right_operand_shareable = true;
    return traits;
  }
  bool builds_whole_inputs(const RecordSource&, const RecordSource&) const override { return whole_inputs_; }

 protected:
  TilePattern symbolic(const Operands& ops) override {
    TilePattern pattern;
    pattern.row_begin = ops.a.row_begin;
    pattern.row_end = ops.a.row_end;
    pattern.row_ptr.assign(static_cast<std::size_t>(ops.a.rows_held()) + 1, 0);
    for (const auto& [key, values] : exact_sums(ops)) {
      if (all_zero(values)) continue;
      pattern.col.push_back(key.second);
      ++pattern.row_ptr[key.first - ops.a.row_begin + 1];
    }
    for (std::size_t r = 1; r < pattern.row_ptr.size(); ++r) pattern.row_ptr[r] += pattern.row_ptr[r - 1];
    return pattern;
  }

  NumericReport numeric(const Operands& ops, const TilePattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    const std::int32_t m = ops.a.shape.m;
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    std::vector<std::byte> records;
    std::int64_t tile = 0;
    for (const auto& [key, values] : exact_sums(ops)) {
      if (all_zero(values)) continue;
      const std::int64_t r = key.first - pattern.row_begin;
      if (tile >= pattern.tiles() || tile < pattern.row_ptr[r] || tile >= pattern.row_ptr[r + 1] ||
          pattern.col[tile] != key.second)
        throw Error(ExitCode::other, "internal error: reference numeric result does not match the tile pattern");
      records.resize(records.size() + stride);
      std::byte* rec = records.data() + tile * stride;
      set_record_index(rec, key.first, key.second);
      for (std::int64_t v = 0; v < static_cast<std::int64_t>(values.size()); ++v) {
        const std::uint32_t s = saturate(values[v]);
        std::memcpy(rec + 8 + 4 * v, &s, 4);
      }
      ++tile;
    }
    if (tile != pattern.tiles())
      throw Error(ExitCode::other, "internal error: reference numeric result has fewer tiles than the pattern");
    if (tile > 0) sink.write(0, tile, records.data());
    if (options.progress) options.progress(tile);
    NumericReport report;
    report.chunks = tile > 0 ? 1 : 0;
    report.device = "host (serial reference)";
    return report;
  }

 private:
  bool whole_inputs_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(const ReferenceConfig& config) {
  return std::make_unique<ReferenceBackend>(config.whole_inputs);
}

}  // namespace blockmm::kernels
