// The cuda backend against the reference backend (random and fixed cases, both kernels, the host
// build, tiny symbolic batches, heavy, wide and skewed rows), the errors it reports and their
// order, chunking under a tiny memory budget, and byte identity with the cpu backend. The dense
// path: cuda_dense_test.cpp; operands cut, staged and copied: cuda_operands_test.cpp. Every test
// skips when no GPU is visible (CI has none; run them on a GPU machine: ctest -L gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "cuda_backend_fixture.hpp"
#include "ledger_budget.hpp"

namespace blockmm::testing {
namespace {

TEST_F(CudaBackend, FixedKernelsMatchReferenceOnRandomCases) { random_cases(320, 4242, 40); }

// The host build (the fallback when the device build would not fit) uploaded instead.
TEST_F(CudaBackend, HostBuiltOperandsMatchReferenceOnRandomCases) {
  g_cuda.build = CudaChoices::Build::host;
  random_cases(120, 4243, 40);
}

// The device symbolic phase in batches far smaller than a matrix: many light-row batches, one
// heavy row a batch, and B's row bitsets left out (they no longer fit a batch).
TEST_F(CudaBackend, SymbolicInTinyBatchesMatchesReference) {
  g_cuda.symbolic_batch_bytes = 512;
  random_cases(120, 4244, 40);
}

// Heavy rows stop once their tile bitset is full (symbolic_kernels.cuh, heavy_row_bitsets): a row
// that fills only at its last A block, one that fills at once and stays full, a half row, and a
// row meeting only the last column, for bitsets of whole words (p = 64, 128) and with a partial
// last word (p = 130, 700); m = 2 with some blocks' masks not full (pairs tested one by one).
TEST_F(CudaBackend, HeavyRowsThatFillEarlyOrOnlyAtTheirLastBlockMatchTheReference) {
  using Blocks = std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>;
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> value(1, 65535);
  for (const std::int32_t m : {1, 2})
    for (const std::int32_t p : {64, 128, 130, 700}) {
      const auto block = [&](bool sparse) {
        std::vector<std::uint16_t> v(static_cast<std::size_t>(m * m));
        for (std::size_t e = 0; e < v.size(); ++e) v[e] = sparse && e % 2 == 1 ? 0 : static_cast<std::uint16_t>(value(rng));
        return v;
      };
      Blocks a_blocks, b_blocks;
      for (int k = 1; k < p; ++k) a_blocks.push_back({0, k, block(k % 7 == 3)});  // fills at its last block
      for (int k = 0; k < p; ++k) a_blocks.push_back({1, k, block(false)});       // full after block 0
      for (int k = 0; k < p / 2; ++k) a_blocks.push_back({2, k, block(false)});   // half the columns of B
      a_blocks.push_back({3, p - 1, block(false)});                              // the last column only
      // B row 0 has every column; rows 1 .. p-2 every column but the last; row p-1 the last alone.
      for (int k = 0; k < p - 1; ++k)
        for (int j = 0; j < (k == 0 ? p : p - 1); ++j) b_blocks.push_back({k, j, block(j % 5 == 1)});
      b_blocks.push_back({p - 1, p - 1, block(false)});
      std::shuffle(a_blocks.begin(), a_blocks.end(), rng);
      std::shuffle(b_blocks.begin(), b_blocks.end(), rng);
      const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
      expect_same(a, b, "m=" + std::to_string(m) + " p=" + std::to_string(p), std::int64_t{256} << 20);
      if (HasFatalFailure()) return;
    }
}

// Duplicates found by the device build name the same block as the host build does (the last
// one in (row, column) order), so the message is the same whichever backend runs.
TEST_F(CudaBackend, DuplicateBlocksGiveTheHostBuildsMessage) {
  std::mt19937_64 rng(1234);
  for (int c = 0; c < 40; ++c) {
    RandomSpec spec = random_spec(rng, 30);
    spec.density = 0.5;
    InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    if (a.size() < 2) continue;
    // Copy the indices of a few records onto others: duplicates, some of them all-zero blocks.
    const int copies = 1 + c % 3;
    for (int d = 0; d < copies; ++d) {
      const std::int64_t from = std::uniform_int_distribution<std::int64_t>(0, a.size() - 1)(rng);
      const std::int64_t to = std::uniform_int_distribution<std::int64_t>(0, a.size() - 1)(rng);
      if (from != to) set_record_index(a.record(to), record_row(a.record(from)), record_col(a.record(from)));
    }
    const auto message = [&](BackendKind kind) -> std::string {
      try {
        multiply(a, b, kind, std::int64_t{256} << 20, 0, g_cuda);
      } catch (const InputError& e) {
        return e.what();
      }
      return "no error";
    };
    const std::string host = message(BackendKind::cpu);
    EXPECT_EQ(host, message(BackendKind::cuda)) << "case " << c;
  }
}

// A records source whose reads fail, as a file with a bad record does.
class FailingSource final : public RecordSource {
 public:
  explicit FailingSource(MatrixShape shape) : shape_(shape) {}
  MatrixShape shape() const override { return shape_; }
  std::int64_t size() const override { return 1000; }
  void read(std::int64_t, std::int64_t, std::byte*) const override { throw InputError("B.bin: record 7 is unreadable"); }
  InputRecords take() override { throw InputError("B.bin: record 7 is unreadable"); }

 private:
  MatrixShape shape_;
};

// The first operand's error comes first, whether the second has a duplicate too or its read
// fails, and the second's own error stands when the first is sound (as the cpu backend reports
// them; a build that overlapped the next operand's read would have to keep this order:
// bench/NOTES.md item 23).
TEST_F(CudaBackend, TheFirstOperandsErrorComesFirst) {
  std::mt19937_64 rng(77);
  RandomSpec spec = random_spec(rng, 30);
  spec.density = 0.5;
  InputRecords a = random_blocks(spec, rng);
  InputRecords b = random_blocks(spec, rng);
  ASSERT_GE(a.size(), 2);
  ASSERT_GE(b.size(), 2);
  const InputRecords sound_a = a;
  set_record_index(a.record(1), record_row(a.record(0)), record_col(a.record(0)));
  set_record_index(b.record(1), record_row(b.record(0)), record_col(b.record(0)));
  const std::int32_t p = a.shape.block_rows();
  const auto named = [](const char* which) {
    return [which](std::int32_t i, std::int32_t j) {
      return std::string(which) + " holds block (" + std::to_string(i) + ", " + std::to_string(j) + ") twice";
    };
  };
  const auto error_of = [&](const InputRecords& left, bool failing_right, const InputRecords& right) -> std::string {
    auto backend = cuda_backend();
    try {
      MemoryRecordSource a_source(left), b_source(right);
      FailingSource failing(right.shape);
      const auto am = backend->build(a_source, {0, p, OperandRole::left, named("A")});
      const auto bm = failing_right ? backend->build(failing, {0, p, OperandRole::right, named("B")})
                                    : backend->build(b_source, {0, p, OperandRole::right, named("B")});
      (void)backend->block_products(*am, *bm);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(a, false, b).rfind("A holds block", 0), 0u) << error_of(a, false, b);
  EXPECT_EQ(error_of(a, true, b).rfind("A holds block", 0), 0u) << error_of(a, true, b);
  EXPECT_EQ(error_of(sound_a, true, b), "B.bin: record 7 is unreadable");
  EXPECT_EQ(error_of(sound_a, false, b).rfind("B holds block", 0), 0u) << error_of(sound_a, false, b);
  EXPECT_EQ(error_of(sound_a, false, sound_a), "no error");
}

// A matrix wide enough that a row's tile bitset cannot sit in shared memory (p = 400 000):
// heavy rows take the global-memory bitsets, light rows the sorted products.
TEST_F(CudaBackend, WideMatrixHeavyRowsMatchTheCpuBackend) {
  std::mt19937_64 rng(4000);
  const std::int32_t p = 400000;
  std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> a_blocks, b_blocks;
  std::uniform_int_distribution<int> column(0, p - 1);
  std::uniform_int_distribution<int> value(0, 65535);
  for (int i = 0; i < 3; ++i)  // three heavy rows of A, 3000 blocks each, meeting B's rows
    for (int e = 0; e < 3000; ++e) a_blocks.push_back({i, column(rng) % 5000, {static_cast<std::uint16_t>(value(rng))}});
  for (int i = 3; i < 2000; ++i) a_blocks.push_back({i, column(rng) % 5000, {static_cast<std::uint16_t>(value(rng))}});
  for (int k = 0; k < 5000; ++k)  // B rows 0..4999 with 20 blocks each
    for (int e = 0; e < 20; ++e) b_blocks.push_back({k, column(rng), {static_cast<std::uint16_t>(1 + value(rng) % 7)}});
  // Repeated (i, j) pairs would be duplicates: keep the first of each.
  const auto dedupe = [](std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>& blocks) {
    std::sort(blocks.begin(), blocks.end(), [](const auto& x, const auto& y) {
      return std::make_pair(std::get<0>(x), std::get<1>(x)) < std::make_pair(std::get<0>(y), std::get<1>(y));
    });
    blocks.erase(std::unique(blocks.begin(), blocks.end(), [](const auto& x, const auto& y) {
                   return std::get<0>(x) == std::get<0>(y) && std::get<1>(x) == std::get<1>(y);
                 }), blocks.end());
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(5));
  };
  dedupe(a_blocks);
  dedupe(b_blocks);
  const InputRecords a = make_records(p, 1, a_blocks), b = make_records(p, 1, b_blocks);
  const ProductRun cpu = multiply(a, b, BackendKind::cpu);
  const ProductRun gpu = multiply(a, b, BackendKind::cuda, std::int64_t{256} << 20, 0, g_cuda);
  ASSERT_GT(cpu.output.size(), 100000);
  ASSERT_TRUE(cpu.output.bytes == gpu.output.bytes) << compare_outputs(cpu.output, gpu.output);
  EXPECT_EQ(cpu.layout.row_ptr, gpu.layout.row_ptr);
}

// Power-law skew (issue #20): A's row 0 holds more blocks than the symbolic phase lets one thread
// block walk (so it is cut into segments), rows 1..200 fall off as 1/i, and B has one long
// column, so tiles meet lists of very different lengths from both sides (searched, not walked).
// Values up to 65535 with a saturating row; against the reference backend for m = 1, 2, 4.
TEST_F(CudaBackend, SkewedRowsAndColumnsMatchTheReference) {
  using Blocks = std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>;
  std::mt19937_64 rng(2020);
  for (const int m : {1, 2, 4}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    const std::int32_t p = m == 1 ? 40000 : 20000;
    std::uniform_int_distribution<int> column(0, p - 1);
    std::uniform_int_distribution<int> value(0, 65535);
    const auto block = [&](bool saturating) {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
      for (auto& x : v) x = saturating ? 65535 : static_cast<std::uint16_t>(value(rng));
      return v;
    };
    Blocks a_blocks, b_blocks;
    const int longest = m == 1 ? 30000 : 17000;
    for (int e = 0; e < longest; ++e) a_blocks.push_back({0, column(rng), block(false)});
    for (int i = 1; i <= 200; ++i)
      for (int e = 0; e < longest / i; ++e) a_blocks.push_back({i, column(rng), block(i == 7)});
    for (int i = 201; i < p; i += 3) a_blocks.push_back({i, column(rng), block(false)});
    for (int k = 0; k < p; ++k)
      for (int e = 0; e < 3; ++e) b_blocks.push_back({k, column(rng), block(k % 97 == 0)});
    for (int k = 0; k < p; k += 4) b_blocks.push_back({k, 11, block(false)});  // a long column
    for (Blocks* blocks : {&a_blocks, &b_blocks}) {  // repeated (i, j) would be duplicates
      std::sort(blocks->begin(), blocks->end(), [](const auto& x, const auto& y) {
        return std::make_pair(std::get<0>(x), std::get<1>(x)) < std::make_pair(std::get<0>(y), std::get<1>(y));
      });
      blocks->erase(std::unique(blocks->begin(), blocks->end(), [](const auto& x, const auto& y) {
                      return std::get<0>(x) == std::get<0>(y) && std::get<1>(x) == std::get<1>(y);
                    }), blocks->end());
      std::shuffle(blocks->begin(), blocks->end(), rng);
    }
    const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
    expect_same(a, b, "skewed", std::int64_t{64} << 20);
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaBackend, GenericKernelMatchesReferenceOnRandomCases) {
  g_cuda.generic_kernel = true;
  random_cases(120, 777, 24);
}

TEST_F(CudaBackend, LargeBlocksUseTheGenericKernel) {
  std::mt19937_64 rng(65);
  for (std::int32_t m : {33, 40, 64}) {
    RandomSpec spec;
    spec.n = m * 5;
    spec.m = m;
    spec.density = 0.5;
    spec.max_value = 65535;
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    expect_same(a, b, "m=" + std::to_string(m), std::int64_t{256} << 20);
  }
}

TEST_F(CudaBackend, DenseRowsSaturationAndSkewMatchTheCpuBackend) {
  std::mt19937_64 rng(99);
  for (std::int32_t m : {1, 2, 4, 8}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 1 ? 700 : 300);
    spec.density = 0.4;
    spec.max_value = 65535;
    spec.empty_row_fraction = 0.1;
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const ProductRun cpu = multiply(a, b, BackendKind::cpu);
    const ProductRun gpu = multiply(a, b, BackendKind::cuda);
    ASSERT_TRUE(cpu.output.bytes == gpu.output.bytes) << "m=" << m << ": " << compare_outputs(cpu.output, gpu.output);
  }
}

TEST_F(CudaBackend, OutputTenTimesTheMemoryBudgetGivesTheSameBytes) {
  std::mt19937_64 rng(7);
  RandomSpec spec;
  spec.n = 4 * 200;
  spec.m = 4;
  spec.density = 0.2;
  spec.max_value = 1023;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  const ProductRun reference = multiply(a, b, BackendKind::reference);
  // Budget: the operands and the pattern on the device, and a tenth of the output to plan with.
  const std::int64_t output_bytes = static_cast<std::int64_t>(reference.output.bytes.size());
  const std::int64_t budget =
      budget_leaving(a, b, reference.layout.tiles(), output_bytes / 10, kernels::cuda::kSparsePathBuffers);
  const ProductRun chunked = multiply(a, b, BackendKind::cuda, std::int64_t{1} << 40, budget);
  EXPECT_GE(chunked.chunks, 10);
  ASSERT_TRUE(reference.output.bytes == chunked.output.bytes) << compare_outputs(reference.output, chunked.output);
}

TEST_F(CudaBackend, BudgetBelowTheInputsIsAClearOutOfMemoryError) {
  std::mt19937_64 rng(8);
  RandomSpec spec;
  spec.n = 64;
  spec.m = 4;
  spec.density = 0.5;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  try {
    multiply(a, b, BackendKind::cuda, std::int64_t{1} << 20, 1024);
    FAIL() << "expected an OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {  // a memory refusal by type: MemoryError in Python
    EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace blockmm::testing
