// The cuda backend's dense path (cuBLAS over the dense tiles) against the reference backend in
// each of its encodings: random cases, saturation and its edge, the narrowest exact encoding for
// the values, a tiny budget that tiles columns and rows, and numeric phases one after another on
// one backend. Every test skips when no GPU is visible (CI has none; ctest -L gpu on a GPU machine).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_backend_fixture.hpp"
#include "ledger_budget.hpp"

namespace blockmm::testing {
namespace {

// Runs `body` once for each encoding choice of the dense path, with the dense path forced: the
// automatic one (the fewest int8 products exact for the values; `path` "dense int8"), the four
// offset byte-plane products whatever the values, and float64.
template <typename Body>
void for_each_dense_encoding(Body&& body) {
  using DenseType = CudaChoices::DenseType;
  g_cuda.dense = CudaChoices::Dense::always;
  const std::pair<DenseType, const char*> choices[] = {
      {DenseType::automatic, "dense int8"}, {DenseType::byte_planes, "int8 byte-plane"}, {DenseType::float64, "float64"}};
  for (const auto& [type, path] : choices) {
    SCOPED_TRACE(std::string("dense ") + path);
    g_cuda.dense_type = type;
    body(std::string(path));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The dense path's automatic encoding for operands whose largest value is `largest`.
std::string narrowest_dense_path(std::uint32_t largest) {
  return largest <= 127 ? "int8 one-plane" : largest <= 4222 ? "int8 split-plane" : "int8 byte-plane";
}

// The backend makes cuBLAS ready (a handle, a first product) before its first numeric phase and
// keeps that handle: numeric phases one after another on one backend, each with its own streams,
// all match the reference, with the warm-up product in room and with a budget that leaves it out.
TEST_F(CudaBackend, DenseNumericPhasesOnOneBackendReuseItsCublasHandle) {
  std::mt19937_64 rng(2024);
  for_each_dense_encoding([&](const std::string& path) {
    for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{64} << 20}) {
      const RandomSpec spec = random_spec(rng, 24);
      const InputRecords a = random_blocks(spec, rng);
      const InputRecords b = random_blocks(spec, rng);
      const std::int32_t p = a.shape.block_rows();
      auto dup = [](std::int32_t i, std::int32_t j) { return "duplicate (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };
      auto backend = cuda_backend(budget);
      MemoryRecordSource a_source(a), b_source(b);
      const auto am = backend->build(a_source, {0, p, OperandRole::left, dup});
      const auto bm = backend->build(b_source, {0, p, OperandRole::right, dup});
      (void)backend->block_products(*am, *bm);
      const auto pattern = backend->symbolic(*am, *bm);
      const ProductRun expected = multiply(a, b, BackendKind::reference);
      for (int run = 0; run < 3; ++run) {
        OutputRecords output;
        output.shape = a.shape;
        AppendingSink sink(output);
        kernels::NumericOptions options;
        options.chunk_bytes = run == 1 ? 1 : std::int64_t{256} << 20;
        const kernels::NumericReport report = backend->numeric(*am, *bm, *pattern, sink, options);
        const std::string what = "run " + std::to_string(run) + ", budget " + std::to_string(budget);
        ASSERT_TRUE(expected.output.bytes == output.bytes) << what << ": " << compare_outputs(expected.output, output);
        if (expected.layout.tiles() > 0) EXPECT_NE(report.device.find(path), std::string::npos) << what << ": " << report.device;
      }
    }
  });
}

TEST_F(CudaBackend, DenseTilesMatchReferenceOnRandomCases) {
  for_each_dense_encoding([](const std::string& path) { random_cases(200, 1999, 32, path); });
}

TEST_F(CudaBackend, DenseTilesSaturateExactly) {
  for_each_dense_encoding([](const std::string& path) {
    std::mt19937_64 rng(31);
    for (std::int32_t m : {1, 4, 8, 5}) {
      RandomSpec spec;
      spec.m = m;
      spec.n = m * 40;
      spec.density = 1.0;
      spec.max_value = 65535;
      spec.zero_value_fraction = 0.97;  // some sums stay below 2^32, most saturate
      const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
      expect_same(a, b, "dense saturation m=" + std::to_string(m), std::int64_t{256} << 20, 0, path);
    }
  });
}

// Every value at the largest of an encoding (65535: both bytes 255; 4222: the split planes'
// hi 65 and lo 62; 127: one plane), one a block 0 where m > 1, and n not a multiple of the int8
// planes' padding: row
// times column sums of w m terms of v^2, with w on either side of saturation (2^32 / (m v^2))
// where such a w is small enough to test.
TEST_F(CudaBackend, DenseTilesAtTheSaturationEdge) {
  for_each_dense_encoding([](const std::string& path) {
    for (const std::uint32_t v : {65535u, 4222u, 127u}) {
      for (std::int32_t m : {1, 3, 8}) {
        const std::int64_t edge = 4294967295LL / (std::int64_t{m} * v * v);
        const std::vector<std::int64_t> widths =
            edge <= 300 ? std::vector<std::int64_t>{std::max<std::int64_t>(1, edge), edge + 1} : std::vector<std::int64_t>{1, 2, 40};
        for (const std::int64_t blocks_per_row : widths) {
          const std::int32_t p = static_cast<std::int32_t>(std::max<std::int64_t>(37, blocks_per_row + 2));
          const std::int32_t n = m * p;
          std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> a_blocks, b_blocks;
          for (int i = 0; i < p; ++i)
            for (int j = 0; j < blocks_per_row; ++j) {
              std::vector<std::uint16_t> values(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(v));
              if (m > 1) values[static_cast<std::size_t>(i % (m * m))] = 0;
              a_blocks.emplace_back(i, (i + j) % p, values);
              b_blocks.emplace_back((i + j) % p, i, values);
            }
          const std::string expected = path == "dense int8" ? narrowest_dense_path(v) : path;
          expect_same(make_records(n, m, a_blocks), make_records(n, m, b_blocks),
                      "edge v=" + std::to_string(v) + " m=" + std::to_string(m) + " blocks/row=" + std::to_string(blocks_per_row),
                      std::int64_t{256} << 20, 0, expected);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  });
}

// The automatic dense encoding on random cases across its boundaries (largest value 1, 127 |
// 128, 4222 | 4223, 65535), each case's largest value present in A or B: the path the values
// allow, byte-identical to the reference, with empty rows and columns, zero blocks and one-tile
// chunks among them.
TEST_F(CudaBackend, DenseNarrowValuesTakeTheFewestExactProducts) {
  g_cuda.dense = CudaChoices::Dense::always;
  std::mt19937_64 rng(4222);
  int c = 0;
  for (const std::uint32_t largest : {1u, 127u, 128u, 4222u, 4223u, 65535u}) {
    for (int round = 0; round < 12; ++round, ++c) {
      RandomSpec spec = random_spec(rng, 30);
      spec.max_value = largest;
      spec.density = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
      InputRecords a = random_blocks(spec, rng);
      InputRecords b = random_blocks(spec, rng);
      InputRecords& holder = c % 2 == 0 ? a : b;
      if (holder.size() == 0) continue;
      // The largest value itself, somewhere in a block that is kept (its other values may be 0).
      auto* values = reinterpret_cast<std::uint16_t*>(holder.record(holder.size() / 2) + 8);
      values[static_cast<std::size_t>(c) % (static_cast<std::size_t>(spec.m) * spec.m)] = static_cast<std::uint16_t>(largest);
      expect_same(a, b,
                  "largest " + std::to_string(largest) + " case " + std::to_string(round) + " n=" + std::to_string(spec.n) +
                      " m=" + std::to_string(spec.m),
                  c % 3 == 0 ? 1 : std::int64_t{256} << 20, 0, narrowest_dense_path(largest));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST_F(CudaBackend, DenseTilesUnderATinyBudgetSplitColumnsAndRows) {
  for_each_dense_encoding([](const std::string& path) {
    std::mt19937_64 rng(17);
    RandomSpec spec;
    spec.n = 4 * 250;
    spec.m = 4;
    spec.density = 0.3;
    spec.max_value = 65535;
    spec.empty_row_fraction = 0.2;
    spec.empty_col_fraction = 0.2;
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const ProductRun reference = multiply(a, b, BackendKind::reference);
    // About 3 MiB to plan with beside the operands and cuBLAS's workspace (at most 2 MiB here): B's
    // dense width (8 MB as float64, 2 MB as int8 planes) cannot stay resident in a quarter of that,
    // so columns are tiled.
    const std::int64_t budget = budget_leaving(a, b, reference.layout.tiles(), (std::int64_t{3} << 20) + 2 * kernels::cuda::kCublasWorkspaceMin,
                                               kernels::cuda::kDensePathBuffers);
    const ProductRun tiled = multiply(a, b, BackendKind::cuda, std::int64_t{64} << 10, budget, g_cuda);
    EXPECT_GT(tiled.chunks, 4);
    EXPECT_NE(tiled.device.find(path), std::string::npos) << tiled.device;
    ASSERT_TRUE(reference.output.bytes == tiled.output.bytes) << compare_outputs(reference.output, tiled.output);
  });
}

}  // namespace
}  // namespace blockmm::testing
