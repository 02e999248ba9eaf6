// Backends against the oracles: the reference backend against a brute-force dense product,
// and every fast backend against the reference, on random and fixed cases.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/dense_reference.hpp"
#include "support/multiply.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using kernels::BackendKind;

std::string describe(const RandomSpec& s) {
  return "n=" + std::to_string(s.n) + " m=" + std::to_string(s.m) + " density=" + std::to_string(s.density) +
         " max=" + std::to_string(s.max_value);
}

TEST(ReferenceBackend, MatchesDenseProductOnRandomCases) {
  std::mt19937_64 rng(20261121);
  for (int c = 0; c < 150; ++c) {
    const RandomSpec spec = random_spec(rng, 12);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    const ProductRun run = multiply(a, b, BackendKind::reference);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(spec));
    EXPECT_EQ(compare_outputs(dense_product(a, b), run.output), "");
    EXPECT_TRUE(sorted_unique(run.output));
  }
}

TEST(CpuBackend, MatchesReferenceOnRandomCases) {
  std::mt19937_64 rng(380);
  int saturated_cases = 0;
  for (int c = 0; c < 320; ++c) {
    const RandomSpec spec = random_spec(rng, 24);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = c % 7 == 0 ? a : random_blocks(spec, rng);  // A x A from one matrix too
    const ProductRun expected = multiply(a, b, BackendKind::reference);
    // Small chunks on some cases so that chunk boundaries are crossed.
    const std::int64_t chunk = c % 3 == 0 ? 1 : std::int64_t{256} << 20;
    const ProductRun actual = multiply(a, b, BackendKind::cpu, chunk);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(spec));
    ASSERT_EQ(expected.output.bytes.size(), actual.output.bytes.size());
    ASSERT_TRUE(expected.output.bytes == actual.output.bytes) << compare_outputs(expected.output, actual.output);
    EXPECT_EQ(expected.layout.row_ptr, actual.layout.row_ptr);
    EXPECT_EQ(expected.block_products, actual.block_products);
    for (std::int64_t q = 0; q < actual.output.size(); ++q)
      for (std::int64_t v = 0; v < actual.output.shape.block_values(); ++v)
        saturated_cases += actual.output.values(q)[v] == 0xFFFFFFFFu;
  }
  EXPECT_GT(saturated_cases, 0) << "the random cases never exercised saturation";
}

InputRecords make(std::int32_t n, std::int32_t m, const std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>& blocks) {
  InputRecords r;
  r.shape = {n, m};
  r.bytes.resize(blocks.size() * static_cast<std::size_t>(r.stride()));
  for (std::size_t q = 0; q < blocks.size(); ++q) {
    std::byte* rec = r.record(static_cast<std::int64_t>(q));
    set_record_index(rec, std::get<0>(blocks[q]), std::get<1>(blocks[q]));
    std::memcpy(rec + 8, std::get<2>(blocks[q]).data(), std::get<2>(blocks[q]).size() * 2);
  }
  return r;
}

class EveryBackend : public ::testing::TestWithParam<BackendKind> {};

TEST_P(EveryBackend, EmptyInputsGiveAnEmptyProduct) {
  const InputRecords a = make(8, 4, {});
  const InputRecords b = make(8, 4, {{0, 0, std::vector<std::uint16_t>(16, 1)}});
  EXPECT_EQ(multiply(a, b, GetParam()).output.size(), 0);
  EXPECT_EQ(multiply(b, a, GetParam()).output.size(), 0);
}

TEST_P(EveryBackend, SaturatesExactlyAtTwoToThe32MinusOne) {
  // m = 1: c = sum over k of 65535 * 65535; two terms already exceed 2^32 - 1.
  std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> a_blocks, b_blocks;
  for (int k = 0; k < 3; ++k) {
    a_blocks.push_back({0, k, {65535}});
    b_blocks.push_back({k, 0, {65535}});
  }
  a_blocks.push_back({1, 0, {65535}});  // row 1: a single product, 4294836225, not saturated
  const OutputRecords out = multiply(make(3, 1, a_blocks), make(3, 1, b_blocks), GetParam()).output;
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out.values(0)[0], 0xFFFFFFFFu);
  EXPECT_EQ(out.values(1)[0], 65535u * 65535u);
}

TEST_P(EveryBackend, DropsBlocksWhoseProductIsZero) {
  // A's only non-zero column is 0, B's only non-zero row is 1: the product block is all zero.
  std::vector<std::uint16_t> a_vals = {5, 0, 7, 0};  // column 0 non-zero
  std::vector<std::uint16_t> b_vals = {0, 0, 3, 4};  // row 1 non-zero
  const OutputRecords out =
      multiply(make(4, 2, {{0, 0, a_vals}, {1, 1, a_vals}}), make(4, 2, {{0, 1, b_vals}, {1, 1, {1, 0, 0, 0}}}), GetParam())
          .output;
  ASSERT_EQ(out.size(), 1);  // only (1,1) x (1,1) survives
  EXPECT_EQ(record_row(out.record(0)), 1);
  EXPECT_EQ(record_col(out.record(0)), 1);
  const std::uint32_t expected[] = {5, 0, 7, 0};
  EXPECT_EQ(std::memcmp(out.values(0), expected, sizeof expected), 0);
}

TEST_P(EveryBackend, AllZeroInputBlocksContributeNothing) {
  const OutputRecords out =
      multiply(make(4, 2, {{0, 0, {0, 0, 0, 0}}}), make(4, 2, {{0, 0, {1, 2, 3, 4}}}), GetParam()).output;
  EXPECT_EQ(out.size(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, EveryBackend, ::testing::Values(BackendKind::reference, BackendKind::cpu),
                         [](const auto& param_info) { return kernels::to_string(param_info.param); });

}  // namespace
}  // namespace blockmm::testing

namespace blockmm::testing {
namespace {

// Every host backend writes every chunk from the thread that called its numeric phase (an MPI-IO
// file then needs nothing of MPI's thread levels), the cpu backend while its team computes the
// next chunk, and the bytes are the reference's.
TEST(SinkThreads, EveryChunkIsWrittenFromTheCallingThread) {
  std::mt19937_64 rng(1717);
  RandomSpec spec;
  spec.n = 480;
  spec.m = 4;
  spec.density = 0.3;
  spec.max_value = 65535;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  const ProductRun expected = multiply(a, b, BackendKind::reference);
  ASSERT_GT(expected.output.size(), 1000);
  for (const BackendKind kind : {BackendKind::cpu, BackendKind::reference}) {
    SCOPED_TRACE(kernels::to_string(kind));
    const std::int64_t chunk = 4096;  // many chunks
    const ProductRun run = multiply(a, b, kind, chunk);
    if (kind == BackendKind::cpu) { EXPECT_GT(run.chunks, 5); }  // the reference backend writes once
    EXPECT_EQ(run.writer_threads, std::set<std::thread::id>{std::this_thread::get_id()});
    EXPECT_TRUE(run.output.bytes == expected.output.bytes);
  }
}

}  // namespace
}  // namespace blockmm::testing
