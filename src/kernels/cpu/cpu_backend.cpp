#include "kernels/cpu/cpu_backend.hpp"

#include <omp.h>

#include "kernels/host_operands.hpp"

namespace blockmm::kernels {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  std::string name() const override { return "cpu"; }
  std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) override {
    return build_host_operand(records, spec);
  }
  std::int64_t block_products(const Operand& a, const Operand& b) override {
    return operands::count_block_products(host_matrix(a), host_matrix(b));
  }
  std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) override {
    return std::make_unique<HostPattern>(cpu_symbolic({host_matrix(a), host_matrix(b)}));
  }
  NumericReport numeric(const Operand& a, const Operand& b, const ProductPattern& pattern, RecordSink& sink,
                        const NumericOptions& options) override {
    return cpu_numeric({host_matrix(a), host_matrix(b)}, host_pattern(pattern), sink, options);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace blockmm::kernels
