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
  BackendTraits traits() const override {
    BackendTraits traits;
    traits.computes_handed_out_tiles = true;
    traits.right_operand_shareable = true;
    return traits;
  }

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

std::unique_ptr<Backend> make_cpu_backend(const CpuConfig& config) { return std::make_unique<CpuBackend>(config.threads); }

}  // namespace blockmm::kernels
