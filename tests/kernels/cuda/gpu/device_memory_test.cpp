// The cuda backend's device memory against its budget (kernels/cuda/device_ledger.hpp): every
// device array it allocates is in its GPU's ledger while it lives and out of it afterwards, the
// ledger's peak stays within the budget on the sparse and the dense path, and a left operand kept
// in host memory takes no device memory, multiplies as the reference does and is shared, not
// copied, by a second backend. (The GPU's observed usage, device-wide and so disturbed by other
// processes, is checked by tests/e2e/gpu/mem_budget.sh, which runs alone.) Every test skips when
// no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>

#include "cuda_backend_fixture.hpp"
#include "kernels/cuda/device_ledger.hpp"
#include "ledger_budget.hpp"

namespace blockmm::testing {
namespace {

using kernels::cuda::device_ledger;

std::string dup(std::int32_t i, std::int32_t j) { return "duplicate (" + std::to_string(i) + ", " + std::to_string(j) + ")"; }

TEST_F(CudaBackend, EveryArrayIsInTheLedgerWhileItLivesAndOutOfItAfter) {
  std::mt19937_64 rng(52);
  RandomSpec spec;
  spec.n = 8 * 300;
  spec.m = 8;
  spec.density = 0.3;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  const std::int64_t arrays_before = device_ledger(0).arrays(), held_before = device_ledger(0).held();
  const ProductRun run = multiply(a, b, BackendKind::cuda, std::int64_t{1} << 20);
  EXPECT_EQ(device_ledger(0).arrays(), arrays_before);
  EXPECT_EQ(device_ledger(0).held(), held_before);
  const std::int32_t p = a.shape.block_rows();
  const std::int64_t operands = kernels::cuda::operand_device_bytes(a.size(), 8, p, p, false) +
                                kernels::cuda::operand_device_bytes(b.size(), 8, p, p, true);
  EXPECT_GT(run.counters.device_memory.ledger_peak, operands + kernels::cuda::kUncountedReserve);
}

// Budgets that leave the numeric phase a few MiB beside the operands: the ledger never holds more
// than the budget, on the sparse path (tensor cores and CUDA cores) and the dense one, in chunks.
TEST_F(CudaBackend, TheLedgerStaysWithinTheBudget) {
  std::mt19937_64 rng(64);
  for (int c = 0; c < 6; ++c) {
    // Sparse: 6 MiB to plan with, tensor cores and CUDA cores; dense: 8 MiB, a smaller product (its
    // plan reserves 20 bytes a tile first).
    const bool dense = c >= 4;
    RandomSpec spec;
    spec.m = c % 2 == 0 ? 8 : 4;
    spec.n = spec.m * (dense ? 150 : 400);
    spec.density = 0.2;
    spec.max_value = 1023;
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const ProductRun expected = multiply(a, b, BackendKind::reference);
    g_cuda = {};
    g_cuda.probe_memory = true;
    g_cuda.dense = dense ? CudaChoices::Dense::always : CudaChoices::Dense::never;
    g_cuda.tensor_core_blocks = c % 4 < 2;
    const std::int64_t budget =
        dense ? budget_leaving(a, b, expected.layout.tiles(), std::int64_t{8} << 20, kernels::cuda::kDensePathBuffers) +
                    2 * kernels::cuda::kCublasWorkspaceMin
              : budget_leaving(a, b, expected.layout.tiles(), std::int64_t{6} << 20, kernels::cuda::kSparsePathBuffers);
    const std::string what = "case " + std::to_string(c) + " m=" + std::to_string(spec.m) + (dense ? " dense" : " sparse");
    const ProductRun run = multiply(a, b, BackendKind::cuda, std::int64_t{256} << 10, budget, g_cuda);
    ASSERT_TRUE(expected.output.bytes == run.output.bytes) << what << ": " << compare_outputs(expected.output, run.output);
    EXPECT_GT(run.chunks, 1) << what;
    const kernels::DeviceMemoryReport& memory = run.counters.device_memory;
    EXPECT_EQ(memory.budget, budget) << what;
    EXPECT_LE(memory.ledger_peak, budget) << what;
    EXPECT_TRUE(memory.every_allocation) << what;
    // For the record (device-wide: not asserted here).
    std::printf("%s: budget %lld, ledger peak %lld, observed peak %lld (%lld beyond the arrays)\n", what.c_str(),
                static_cast<long long>(budget), static_cast<long long>(memory.ledger_peak),
                static_cast<long long>(memory.observed_peak), static_cast<long long>(memory.beyond_arrays_peak));
  }
}

// A left operand in host memory (a team's A where it does not fit beside the numeric chunks):
// no device memory, the reference's bytes on every path and chunk size, and a second backend
// shares it instead of copying it.
TEST_F(CudaBackend, ALeftOperandInHostMemoryMultipliesAsTheReference) {
  std::mt19937_64 rng(40);
  TwoGpus gpus;
  for (int c = 0; c < 24; ++c) {
    choose_path_of_case(c);
    RandomSpec spec = random_spec(rng, 40);
    if (c % 4 == 0) spec.m = 8;  // the tensor-core kernel
    spec.n = spec.m * std::max<std::int32_t>(1, spec.n / std::max<std::int32_t>(1, spec.m));
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const std::int32_t p = a.shape.block_rows();
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m);
    auto first = gpus.backend();
    auto second = gpus.backend(true);
    MemoryRecordSource a_source(a), b_source(b);
    OperandSpec a_spec{0, p, OperandRole::left, dup};
    a_spec.in_host_memory = true;
    EXPECT_EQ(first->operand_bytes(a_source, a_spec), 0) << what;
    const std::int64_t arrays = device_ledger(0).arrays();
    const auto am = first->build(a_source, a_spec);
    EXPECT_EQ(device_ledger(0).arrays(), arrays) << what << ": A took device memory";
    const auto bm = first->build(b_source, {0, p, OperandRole::right, dup});
    const std::int64_t other_arrays = device_ledger(gpus.other()).arrays();
    const auto a_shared = second->copy_operand(*am);
    EXPECT_EQ(device_ledger(gpus.other()).arrays(), other_arrays) << what << ": A copied, not shared";
    const auto b_copy = second->copy_operand(*bm);
    const ProductRun expected = multiply(a, b, BackendKind::reference);
    for (const auto& [backend, left, right] : {std::make_tuple(first.get(), am.get(), bm.get()),
                                               std::make_tuple(second.get(), a_shared.get(), b_copy.get())}) {
      EXPECT_EQ(backend->block_products(*left, *right), expected.block_products) << what;
      const auto pattern = backend->symbolic(*left, *right);
      EXPECT_EQ(pattern->layout().row_ptr, expected.layout.row_ptr) << what;
      OutputRecords output;
      output.shape = a.shape;
      AppendingSink sink(output);
      kernels::NumericOptions options;
      options.chunk_bytes = c % 4 == 1 ? 1 : std::int64_t{256} << 20;
      const kernels::NumericReport report = backend->numeric(*left, *right, *pattern, sink, options);
      ASSERT_TRUE(expected.output.bytes == output.bytes) << what << ": " << compare_outputs(expected.output, output);
      if (expected.layout.tiles() > 0)
        EXPECT_NE(report.device.find("A read from host memory"), std::string::npos) << what << ": " << report.device;
    }
  }
}

}  // namespace
}  // namespace blockmm::testing
