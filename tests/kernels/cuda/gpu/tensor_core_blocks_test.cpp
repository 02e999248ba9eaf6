// The sparse path's block products on tensor cores (kernels/cuda/tensor_tile_kernel.cuh, issue 40
// item 2) against the reference backend: m = 8, 16, 32 on random inputs (values up to 1023 and
// 65535), the saturation edge, enough products per output block to fold the int32 accumulators
// several times, skewed rows (the two-pointer matching) beside uniform ones (the A-row bitmap),
// a matrix too wide for the bitmap, empty rows and operands, and the CUDA-core kernel where
// B's byte planes do not fit the budget or BLOCKMM_CUDA_TC=0's choice asks for it. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_support.hpp"
#include "ledger_budget.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using kernels::CudaChoices;
using Blocks = std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>;

const char* const kTensorPath = "sparse tensor-core blocks";
const char* const kCudaCorePath = "sparse tile kernels";

// The sparse path, with or without tensor cores.
CudaChoices sparse(bool tensor_cores = true) {
  CudaChoices choices;
  choices.dense = CudaChoices::Dense::never;
  choices.tensor_core_blocks = tensor_cores;
  return choices;
}

void dedupe(Blocks& blocks, std::mt19937_64& rng) {  // repeated (i, j) would be duplicates
  std::sort(blocks.begin(), blocks.end(), [](const auto& x, const auto& y) {
    return std::make_pair(std::get<0>(x), std::get<1>(x)) < std::make_pair(std::get<0>(y), std::get<1>(y));
  });
  blocks.erase(std::unique(blocks.begin(), blocks.end(), [](const auto& x, const auto& y) {
                 return std::get<0>(x) == std::get<0>(y) && std::get<1>(x) == std::get<1>(y);
               }), blocks.end());
  std::shuffle(blocks.begin(), blocks.end(), rng);
}

TEST(CudaTensorCoreBlocks, RandomCasesMatchTheReference) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(4002);
  for (int c = 0; c < 60; ++c) {
    RandomSpec spec;
    spec.m = std::vector<std::int32_t>{8, 16, 32}[static_cast<std::size_t>(c % 3)];
    spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(1, spec.m == 32 ? 60 : 150)(rng);
    spec.density = std::vector<double>{0.02, 0.1, 0.4, 1.0}[static_cast<std::size_t>(c / 3 % 4)];
    spec.max_value = c % 2 ? 65535 : 1023;
    spec.zero_value_fraction = c % 5 == 0 ? 0.5 : 0;
    spec.zero_block_fraction = c % 7 == 0 ? 0.1 : 0;
    spec.empty_row_fraction = c % 4 == 1 ? 0.3 : 0;
    spec.empty_col_fraction = c % 4 == 2 ? 0.3 : 0;
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = c % 9 == 0 ? a : random_blocks(spec, rng);
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m);
    // One-tile chunks every fourth case: many chunks through the pipeline.
    expect_reference_bytes(a, b, sparse(), what, 0, {kTensorPath}, c % 4 == 3 ? 1 : std::int64_t{256} << 20);
    if (HasFatalFailure()) return;
  }
}

// Every value v in A's row i against B's column j over w matched blocks: each output element is
// w m v^2 (one value in each block 0, so some elements fall short). w on either side of
// 2^32 - 1 for v = 1023, and v = 65535, whose every product saturates.
TEST(CudaTensorCoreBlocks, SaturationEdge) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  for (const std::int32_t m : {8, 16, 32}) {
    for (const std::uint32_t v : {1023u, 65535u}) {
      const std::int64_t edge = 4294967295LL / (std::int64_t{m} * v * v);
      const std::vector<std::int64_t> widths = v == 1023 ? std::vector<std::int64_t>{edge, edge + 1} : std::vector<std::int64_t>{1, 2};
      const std::int32_t p = static_cast<std::int32_t>(edge + 8);
      Blocks a_blocks, b_blocks;
      int row = 0;
      for (const std::int64_t w : widths) {
        for (int k = 0; k < w; ++k) {
          std::vector<std::uint16_t> values(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(v));
          values[static_cast<std::size_t>((k + row) % (m * m))] = 0;
          a_blocks.push_back({row, k, values});
        }
        ++row;
      }
      for (int k = 0; k < p; ++k) b_blocks.push_back({k, 0, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(v))});
      const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
      expect_reference_bytes(a, b, sparse(), "m=" + std::to_string(m) + " v=" + std::to_string(v), 0, {kTensorPath});
      if (HasFatalFailure()) return;
    }
  }
}

// Output blocks of w m terms of 255 * 255 (hi bytes 0, so only ll grows): 48 000 terms, 3.1e9,
// past int32 and below 2^32, so a missed or late fold of the int32 accumulators shows; one block
// of each row another value, and a second row of random values up to 1023.
TEST(CudaTensorCoreBlocks, ManyProductsPerOutputBlockFoldTheInt32Sums) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(48000);
  for (const std::int32_t m : {8, 16, 32}) {
    const int w = 48000 / m;  // m = 8: 1500 K-steps of four products; 16: 1500 of two; 32: 1500 of one
    const std::int32_t p = w + 16;
    std::uniform_int_distribution<int> value(0, 1023);
    Blocks a_blocks, b_blocks;
    const std::vector<std::uint16_t> full(static_cast<std::size_t>(m) * m, 255);
    for (int k = 0; k < w; ++k) {
      std::vector<std::uint16_t> first = full, random(static_cast<std::size_t>(m) * m);
      if (k == w / 2) first[5] = 77;
      for (auto& x : random) x = static_cast<std::uint16_t>(value(rng));
      a_blocks.push_back({0, k, first});
      a_blocks.push_back({1, p - 1 - k, random});
      b_blocks.push_back({k, 0, full});
      b_blocks.push_back({p - 1 - k, 1, full});
      b_blocks.push_back({k, 2, random});
    }
    dedupe(a_blocks, rng);
    dedupe(b_blocks, rng);
    const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
    expect_reference_bytes(a, b, sparse(), "m=" + std::to_string(m), 0, {kTensorPath});
    if (HasFatalFailure()) return;
  }
}

// A very long A row (nine tenths of p blocks) against B columns of two or three blocks, where
// the A-row bitmap does not pay (tensor_tile.hpp, bitmap_pays: at p = 150 000, 80 000, 20 000 for
// m = 8, 16, 32 the row's bitmap costs more than the walks' searches of its units), so the
// units walk with two pointers and search the long row; rows falling off as 1/i (the bitmap
// again, and the walk for the units at a row's end), empty rows, values up to 65535 with a
// saturating row, one long B column.
TEST(CudaTensorCoreBlocks, SkewedRowsMatchTheReference) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2040);
  for (const std::int32_t m : {8, 16, 32}) {
    const std::int32_t p = m == 8 ? 150000 : m == 16 ? 80000 : 20000;
    std::uniform_int_distribution<int> column(0, p - 1);
    std::uniform_int_distribution<int> value(0, 65535);
    std::bernoulli_distribution most(0.9);
    const auto block = [&](bool saturating) {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
      for (auto& x : v) x = saturating ? 65535 : static_cast<std::uint16_t>(value(rng));
      return v;
    };
    Blocks a_blocks, b_blocks;
    for (int k = 0; k < p; ++k)
      if (most(rng)) a_blocks.push_back({0, k, block(false)});
    for (int i = 1; i <= 60; ++i)
      for (int e = 0; e < p / (8 * i); ++e) a_blocks.push_back({i, column(rng), block(i == 7)});
    for (int i = 61; i < 400; i += 5) a_blocks.push_back({i, column(rng), block(false)});  // rows between stay empty
    for (int k = 0; k < p; ++k)
      for (int e = 0; e < 2; ++e) b_blocks.push_back({k, column(rng), block(false)});
    for (int k = 0; k < p; k += 3) b_blocks.push_back({k, 11, block(false)});  // a long column
    dedupe(a_blocks, rng);
    dedupe(b_blocks, rng);
    const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
    expect_reference_bytes(a, b, sparse(), "skewed m=" + std::to_string(m), 0, {kTensorPath}, std::int64_t{32} << 20);
    if (HasFatalFailure()) return;
  }
}

// p = 270 000 block-columns: the A-row bitmap does not fit shared memory, every unit walks.
TEST(CudaTensorCoreBlocks, MatrixTooWideForTheBitmapMatchesTheReference) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(270000);
  const std::int32_t m = 8, p = 270000;
  std::uniform_int_distribution<int> any(0, p - 1);
  std::uniform_int_distribution<int> value(0, 65535);
  const auto block = [&] {
    std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
    for (auto& x : v) x = static_cast<std::uint16_t>(value(rng));
    return v;
  };
  Blocks a_blocks, b_blocks;
  for (int i = 0; i < 40; ++i)
    for (int e = 0; e < 300; ++e) a_blocks.push_back({any(rng) % 500, any(rng) % 3000, block()});
  for (int k = 0; k < 3000; ++k)
    for (int e = 0; e < 5; ++e) b_blocks.push_back({k, any(rng), block()});
  dedupe(a_blocks, rng);
  dedupe(b_blocks, rng);
  const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
  expect_reference_bytes(a, b, sparse(), "p=270000", 0, {kTensorPath});
}

// Empty operands and rows, a product with no tiles, and 1-block matrices.
TEST(CudaTensorCoreBlocks, EmptyOperandsAndTinyMatrices) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(0);
  for (const std::int32_t m : {8, 16, 32}) {
    const std::vector<std::uint16_t> ones(static_cast<std::size_t>(m) * m, 1);
    const InputRecords empty = make_records(4 * m, m, {});
    const InputRecords one = make_records(4 * m, m, {{1, 2, ones}});
    const InputRecords other = make_records(4 * m, m, {{3, 0, ones}});  // meets nothing of `one`
    expect_reference_bytes(empty, one, sparse(), "empty A m=" + std::to_string(m));
    expect_reference_bytes(one, empty, sparse(), "empty B m=" + std::to_string(m));
    expect_reference_bytes(one, other, sparse(), "no tiles m=" + std::to_string(m));
    expect_reference_bytes(one, make_records(4 * m, m, {{2, 3, ones}}), sparse(), "one tile m=" + std::to_string(m), 0,
                           {kTensorPath});
    expect_reference_bytes(make_records(m, m, {{0, 0, ones}}), make_records(m, m, {{0, 0, ones}}), sparse(),
                           "n = m, m=" + std::to_string(m), 0, {kTensorPath});
  }
}

// BLOCKMM_CUDA_TC=0's choice keeps the CUDA-core kernels (same bytes); a budget that cannot hold
// B's byte planes beside the rest falls back to them too; the tensor-core and CUDA-core kernels
// and the cpu backend agree byte for byte.
TEST(CudaTensorCoreBlocks, CudaCoreKernelsWhereAskedForOrWhereThePlanesDoNotFit) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(99);
  for (const std::int32_t m : {8, 16, 32}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 32 ? 64 : 160);
    spec.density = 0.5;
    spec.max_value = 65535;
    spec.empty_row_fraction = 0.1;
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const std::string what = "m=" + std::to_string(m);
    const ProductRun tensor = expect_reference_bytes(a, b, sparse(true), what + " tensor cores", 0, {kTensorPath});
    const ProductRun cuda_cores = expect_reference_bytes(a, b, sparse(false), what + " CUDA cores", 0, {kCudaCorePath});
    const ProductRun cpu = multiply(a, b, kernels::BackendKind::cpu);
    EXPECT_TRUE(cpu.output.bytes == tensor.output.bytes) << what << ": " << compare_outputs(cpu.output, tensor.output);
    // Room for the operands, the pattern and a few chunks, not for B's planes (2 m^2 bytes a
    // block, as much as B's values).
    const std::int64_t budget =
        budget_leaving(a, b, tensor.layout.tiles(), b.size() * m * m, kernels::cuda::kSparsePathBuffers);
    expect_reference_bytes(a, b, sparse(true), what + " small budget", budget, {kCudaCorePath}, 1);
    if (HasFatalFailure()) return;
  }
}

// The automatic choice between the paths (the dense one where it is predicted faster) keeps the
// bytes, with tensor cores on and off.
TEST(CudaTensorCoreBlocks, AutomaticPathChoiceMatchesTheReference) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(77);
  for (int c = 0; c < 24; ++c) {
    RandomSpec spec = random_spec(rng, 60);
    spec.m = std::vector<std::int32_t>{4, 8, 16, 32}[static_cast<std::size_t>(c % 4)];
    spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(1, 100)(rng);
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    CudaChoices automatic;
    automatic.tensor_core_blocks = c % 2 == 0;
    expect_reference_bytes(a, b, automatic, "case " + std::to_string(c) + " m=" + std::to_string(spec.m), 0, {"predicted: sparse"});
    if (HasFatalFailure()) return;
  }
}

// Where the dense path is predicted faster but the budget cannot hold its smallest tiles (its
// reserve for the tiles' columns and units alone passes the room), the sparse path runs.
TEST(CudaTensorCoreBlocks, DensePredictedButOverTheBudgetRunsSparse) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(5);
  RandomSpec spec;
  spec.n = 2000;
  spec.m = 4;
  spec.density = 0.5;
  spec.max_value = 65535;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  const ProductRun expected = multiply(a, b, kernels::BackendKind::reference);
  // 2 MiB to plan with beside the operands and the pattern: room for the sparse kernels' units and
  // a few tiles, not for the dense path's 20 bytes a tile.
  const std::int64_t budget =
      budget_leaving(a, b, expected.layout.tiles(), std::int64_t{2} << 20, kernels::cuda::kSparsePathBuffers);
  const ProductRun run = expect_reference_bytes(a, b, CudaChoices{}, "dense predicted, over the budget", budget,
                                                {kCudaCorePath, "predicted: sparse"});
  EXPECT_GT(expected.layout.tiles() * 20, std::int64_t{2} << 20);  // the dense path's reserve alone
  // The prediction did favour the dense path.
  const auto number_after = [&](const std::string& key) { return std::stod(run.device.substr(run.device.find(key) + key.size())); };
  EXPECT_LT(number_after("dense "), number_after("predicted: sparse ")) << run.device;
}

}  // namespace
}  // namespace blockmm::testing
