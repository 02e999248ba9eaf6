#include "kernels/cpu/cpu_backend.hpp"

#include <omp.h>

#include "kernels/host_operands.hpp"

namespace blockmm::kernels {

namespace {

class CpuBackend final : public HostBackend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  std::string name() const override { return "cpu"; }
  bool computes_handed_out_tiles() const override { return true; }

 protected:
  TilePattern symbolic(const Operands& operands) override { return cpu_symbolic(operands); }
  NumericReport numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    return cpu_numeric(operands, pattern, sink, options, &workspace_);
  }

 private:
  CpuNumericWorkspace workspace_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace blockmm::kernels
