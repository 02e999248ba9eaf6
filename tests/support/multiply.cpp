#include "support/multiply.hpp"

#include <cstring>
#include <stdexcept>
#include <string>


namespace blockmm::testing {
namespace {

class MemorySink final : public RecordSink {
 public:
  MemorySink(OutputRecords& out, std::set<std::thread::id>& threads) : out_(out), threads_(threads) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    threads_.insert(std::this_thread::get_id());
    const std::int64_t stride = out_.stride();
    if (first_tile * stride != static_cast<std::int64_t>(out_.bytes.size()))
      throw std::logic_error("sink received tiles out of order at tile " + std::to_string(first_tile));
    out_.bytes.insert(out_.bytes.end(), records, records + count * stride);
  }

 private:
  OutputRecords& out_;
  std::set<std::thread::id>& threads_;  // calls are serialised (RecordSink), so no lock
};

}  // namespace

std::unique_ptr<kernels::Backend> make_test_backend(kernels::BackendKind kind, std::int64_t device_budget,
                                                    const kernels::CudaChoices& cuda) {
  switch (kind) {
    case kernels::BackendKind::reference: return kernels::make_reference_backend();
    case kernels::BackendKind::cpu: return kernels::make_cpu_backend();
    case kernels::BackendKind::cuda: break;
  }
  // One CUDA start for the test process, as blockmm has one a process.
  static kernels::CudaStart start(true);
  kernels::CudaConfig config;
  config.device = 0;
  config.memory_budget = device_budget;
  config.choices = cuda;
  return start.make_backend(config);
}

ProductRun multiply(const InputRecords& a, const InputRecords& b, kernels::BackendKind kind, std::int64_t chunk_bytes,
                    std::int64_t device_budget, const kernels::CudaChoices& cuda) {
  const std::int32_t p = a.shape.block_rows();
  auto dup = [](std::int32_t i, std::int32_t j) {
    return "duplicate block (" + std::to_string(i) + ", " + std::to_string(j) + ")";
  };
  auto backend = make_test_backend(kind, device_budget, cuda);
  MemoryRecordSource a_source(a);
  MemoryRecordSource b_source(b);
  const auto am = backend->build(a_source, {0, p, OperandRole::left, dup});
  const auto bm = backend->build(b_source, {0, p, OperandRole::right, dup});
  ProductRun run;
  run.block_products = backend->block_products(*am, *bm);
  const auto pattern = backend->symbolic(*am, *bm);
  run.layout = pattern->layout();
  run.output.shape = a.shape;
  MemorySink sink(run.output, run.writer_threads);
  kernels::NumericOptions options;
  options.chunk_bytes = chunk_bytes;
  const kernels::NumericReport report = backend->numeric(*am, *bm, *pattern, sink, options);
  run.chunks = report.chunks;
  run.device = report.device;
  run.counters = backend->counters();
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
