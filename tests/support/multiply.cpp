#include "support/multiply.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "partition/compress.hpp"

namespace blockmm::testing {
namespace {

class MemorySink final : public RecordSink {
 public:
  explicit MemorySink(OutputRecords& out) : out_(out) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    const std::int64_t stride = out_.stride();
    if (first_tile * stride != static_cast<std::int64_t>(out_.bytes.size()))
      throw std::logic_error("sink received tiles out of order at tile " + std::to_string(first_tile));
    out_.bytes.insert(out_.bytes.end(), records, records + count * stride);
  }

 private:
  OutputRecords& out_;
};

}  // namespace

ProductRun multiply(const InputRecords& a, const InputRecords& b, kernels::BackendKind kind, std::int64_t chunk_bytes,
                    std::int64_t device_budget) {
  const std::int32_t p = a.shape.block_rows();
  auto dup = [](std::int32_t i, std::int32_t j) {
    return "duplicate block (" + std::to_string(i) + ", " + std::to_string(j) + ")";
  };
  const BlockMatrix am = partition::build_block_matrix(a, 0, p, partition::OperandRole::left, dup);
  const BlockMatrix bm = partition::build_block_matrix(b, 0, p, partition::OperandRole::right, dup);
  auto backend = kernels::make_backend(kind, {});
  const kernels::Operands ops{am, bm};
  ProductRun run;
  run.pattern = backend->symbolic(ops);
  run.output.shape = a.shape;
  MemorySink sink(run.output);
  kernels::NumericOptions options;
  options.chunk_bytes = chunk_bytes;
  options.device_memory_budget = device_budget;
  const kernels::NumericReport report = backend->numeric(ops, run.pattern, sink, options);
  run.chunks = report.chunks;
  run.device = report.device;
  return run;
}

bool sorted_unique(const OutputRecords& records) {
  for (std::int64_t q = 1; q < records.size(); ++q) {
    const auto prev = std::make_pair(record_row(records.record(q - 1)), record_col(records.record(q - 1)));
    const auto cur = std::make_pair(record_row(records.record(q)), record_col(records.record(q)));
    if (!(prev < cur)) return false;
  }
  return true;
}

}  // namespace blockmm::testing
