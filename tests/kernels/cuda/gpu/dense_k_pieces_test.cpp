// The dense path's int8 products over an inner dimension longer than one exact int32 GEMM
// (issue 40 item 1: n > 131056 fell to float64 before): K cut into pieces whose int64 sums the
// gather reads, against the reference backend, for every encoding, with sums that overflow int32
// over the whole K, and at the saturation edge across pieces. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_support.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using kernels::CudaChoices;
using Blocks = std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>;

CudaChoices dense(CudaChoices::DenseType type = CudaChoices::DenseType::automatic) {
  CudaChoices choices;
  choices.dense = CudaChoices::Dense::always;
  choices.dense_type = type;
  return choices;
}

// A few block-rows of A and block-columns of B over the whole inner dimension of p blocks (so the
// dense tiles are long but few), values drawn up to `largest` (which appears), and one A row and
// one B column full of `largest`: their sum over the whole K passes 2^31 where largest^2 n does.
void long_k_case(std::int32_t p, std::int32_t m, std::uint32_t largest, std::mt19937_64& rng, InputRecords& a,
                 InputRecords& b) {
  std::uniform_int_distribution<std::uint32_t> value(0, largest);
  const auto block = [&](bool full) {
    std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
    for (auto& x : v) x = static_cast<std::uint16_t>(full ? largest : value(rng));
    return v;
  };
  Blocks a_blocks, b_blocks;
  for (int k = 0; k < p; ++k) a_blocks.push_back({0, k, block(true)});  // a full row
  for (int k = 0; k < p; ++k) b_blocks.push_back({k, 0, block(true)});  // a full column
  std::bernoulli_distribution present(0.1);
  for (int i = 1; i < 4; ++i)
    for (int k = 0; k < p; ++k)
      if (present(rng) || k == p - 1) a_blocks.push_back({i, k, block(false)});  // the last K entries too
  for (int j = 1; j < 3; ++j)
    for (int k = 0; k < p; ++k)
      if (present(rng) || k == p - 1) b_blocks.push_back({k, j, block(false)});
  a = make_records(p * m, m, a_blocks);
  b = make_records(p * m, m, b_blocks);
}

// n = 136 000 (> 131 056): the byte planes (any values) and the narrow planes of values up to
// 127 or 4222 need two pieces, the split planes of values up to 1023 still one; float64 (asked
// for) the same bytes. The byte planes' zeros alone (offset -128) overflow int32 over the whole K.
TEST(CudaDenseKPieces, LongInnerDimensionMatchesTheReferenceInEveryEncoding) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(40);
  const std::int32_t m = 8, p = 17000;
  const std::int64_t budget = std::int64_t{1} << 30;  // B in column tiles: only those with output are expanded
  const std::tuple<std::uint32_t, CudaChoices::DenseType, std::vector<std::string>> cases[] = {
      {127, CudaChoices::DenseType::automatic, {"int8 one-plane", "K in 2 pieces"}},
      {1023, CudaChoices::DenseType::automatic, {"int8 split-plane"}},
      {4222, CudaChoices::DenseType::automatic, {"int8 split-plane", "K in 2 pieces"}},
      {65535, CudaChoices::DenseType::automatic, {"int8 byte-plane", "K in 2 pieces"}},
      {127, CudaChoices::DenseType::byte_planes, {"int8 byte-plane", "K in 2 pieces"}},
      {65535, CudaChoices::DenseType::float64, {"float64"}}};
  for (const auto& [largest, type, paths] : cases) {
    InputRecords a, b;
    long_k_case(p, m, largest, rng, a, b);
    const std::string what = "largest " + std::to_string(largest) + " type " + std::to_string(int(type));
    const ProductRun run = expect_reference_bytes(a, b, dense(type), what, budget, {});
    for (const std::string& path : paths) EXPECT_NE(run.device.find(path), std::string::npos) << what << ": " << run.device;
    if (largest == 1023) EXPECT_EQ(run.device.find("pieces"), std::string::npos) << what << ": " << run.device;
    if (HasFatalFailure()) return;
  }
}

// Sums at the saturation edge, across three pieces: n = 320 000, values 127 (one plane). Against
// B's column 0 (blocks 0 .. w) A's row 0 meets w full blocks, where w * 8 * 127^2 is the largest
// sum below 2^32 - 1, and row 1 w + 1, which saturates; against column 1 (the last w + 1 blocks of
// K) row 2 meets w + 1 and row 3 w. Also through the byte planes and float64.
TEST(CudaDenseKPieces, SaturationEdgeAcrossPieces) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  const std::int32_t m = 8, p = 40000;
  const int w = static_cast<int>(4294967295LL / (std::int64_t{m} * 127 * 127));  // 33 286
  ASSERT_LE(std::int64_t{w} * m * 127 * 127, 4294967295LL);
  ASSERT_GT(std::int64_t{w + 1} * m * 127 * 127, 4294967295LL);
  const std::vector<std::uint16_t> full(static_cast<std::size_t>(m) * m, 127);
  Blocks a_blocks, b_blocks;
  for (int k = 0; k < w; ++k) a_blocks.push_back({0, k, full});
  for (int k = 0; k <= w; ++k) a_blocks.push_back({1, k, full});
  for (int k = p - 1 - w; k < p; ++k) a_blocks.push_back({2, k, full});
  for (int k = p - w; k < p; ++k) a_blocks.push_back({3, k, full});
  for (int k = 0; k <= w; ++k) b_blocks.push_back({k, 0, full});
  for (int k = p - 1 - w; k < p; ++k) b_blocks.push_back({k, 1, full});
  const InputRecords a = make_records(p * m, m, a_blocks), b = make_records(p * m, m, b_blocks);
  const std::int64_t budget = std::int64_t{2} << 30;
  expect_reference_bytes(a, b, dense(), "one plane", budget, {"int8 one-plane", "K in 3 pieces"});
  expect_reference_bytes(a, b, dense(CudaChoices::DenseType::byte_planes), "byte planes", budget,
                         {"int8 byte-plane", "K in 3 pieces"});
  expect_reference_bytes(a, b, dense(CudaChoices::DenseType::float64), "float64", budget, {"float64"});
}

// Random inputs just past the old limit (n = 131 072 + a few blocks, m = 8 and 16): A's blocks in
// a dozen rows (one long, one empty; the dense tiles stay a few rows high), B's scattered over
// every column and a few long columns, values up to 127, 1023 and 65 535 with some at the top,
// some all-zero blocks; through the dense path forced and the automatic choice.
TEST(CudaDenseKPieces, RandomCasesPastTheOldLimitMatchTheReference) {
  BLOCKMM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(4040);
  for (int c = 0; c < 6; ++c) {
    const std::int32_t m = c % 2 ? 8 : 16;
    const std::int32_t p = 131072 / m + 1 + c;
    const std::uint32_t largest = std::vector<std::uint32_t>{127, 1023, 65535}[static_cast<std::size_t>(c % 3)];
    std::uniform_int_distribution<std::uint32_t> value(0, largest);
    std::uniform_int_distribution<int> any(0, p - 1);
    const auto block = [&] {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      for (auto& x : v) x = static_cast<std::uint16_t>(kind == 0 ? 0 : kind == 1 ? largest : value(rng));
      return v;
    };
    Blocks a_blocks, b_blocks;
    std::vector<int> rows;
    for (int r = 0; r < 12; ++r) rows.push_back(any(rng));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const int count = r == 0 ? 3000 : r == 1 ? 0 : std::uniform_int_distribution<int>(1, 400)(rng);
      for (int e = 0; e < count; ++e) a_blocks.push_back({rows[r], any(rng), block()});
    }
    for (int e = 0; e < 20000; ++e) b_blocks.push_back({any(rng), any(rng), block()});
    for (int j = 0; j < 4; ++j) {
      const int col = any(rng);
      for (int e = 0; e < 2000; ++e) b_blocks.push_back({any(rng), col, block()});
    }
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
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(p * m) + " m=" + std::to_string(m);
    expect_reference_bytes(a, b, dense(), what + " dense", std::int64_t{2} << 30, {"dense int8"});
    expect_reference_bytes(a, b, CudaChoices{}, what + " auto", std::int64_t{2} << 30);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace blockmm::testing
