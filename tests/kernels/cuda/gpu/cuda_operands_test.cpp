// The cuda backend's operands beyond one product: whole operands cut into row ranges (whole
// inputs on every rank), the staging pinned at CUDA's start carrying the first backend's work, and
// operands copied to another backend (between GPUs: peer copies), each against the reference
// backend's bytes. Every test skips when no GPU is visible (CI has none; ctest -L gpu on a GPU
// machine).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_backend_fixture.hpp"

namespace blockmm::testing {
namespace {

// Whole inputs on every rank (driver/whole_inputs.hpp): both operands built whole, the block
// products of each row against a count straight from the records, then A cut into row ranges
// (some empty, at the ends too) whose products, one after the other, are the reference's bytes.
TEST_F(CudaBackend, WholeOperandsCutIntoRowRangesMatchTheReference) {
  std::mt19937_64 rng(5150);
  const auto dup = [](std::int32_t i, std::int32_t j) { return "duplicate (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };
  const auto all_zero = [](const InputRecords& records, std::int64_t q) {
    const auto* values = reinterpret_cast<const std::uint16_t*>(records.record(q) + 8);
    return std::all_of(values, values + records.shape.block_values(), [](std::uint16_t v) { return v == 0; });
  };
  for (int c = 0; c < 80; ++c) {
    const RandomSpec spec = random_spec(rng, 40);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = c % 7 == 0 ? a : random_blocks(spec, rng);
    const std::int32_t p = a.shape.block_rows();
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m);
    // Block products of each row, from the records: A's non-zero (i, k) times B's non-zero blocks in row k.
    std::vector<std::int64_t> b_row(static_cast<std::size_t>(p), 0), expected_products(static_cast<std::size_t>(p), 0);
    for (std::int64_t q = 0; q < b.size(); ++q)
      if (!all_zero(b, q)) ++b_row[static_cast<std::size_t>(record_row(b.record(q)))];
    for (std::int64_t q = 0; q < a.size(); ++q)
      if (!all_zero(a, q))
        expected_products[static_cast<std::size_t>(record_row(a.record(q)))] += b_row[static_cast<std::size_t>(record_col(a.record(q)))];

    auto backend = cuda_backend();
    MemoryRecordSource a_source(a), b_source(b);
    ASSERT_TRUE(backend->builds_whole_inputs(a_source, b_source)) << what;
    const auto bm = backend->build(b_source, {0, p, OperandRole::right, dup});
    const auto whole_a = [&] {
      MemoryRecordSource source(a);
      return backend->build(source, {0, p, OperandRole::left, dup});
    };
    auto am = whole_a();
    ASSERT_EQ(backend->row_products(*am, *bm), expected_products) << what;
    const std::int64_t a_blocks = am->blocks();

    // Cut points: 1 to 4 ranges, repeats allowed (empty ranges).
    std::vector<std::int32_t> bounds{0, p};
    const int cuts = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int k = 0; k < cuts; ++k) bounds.push_back(std::uniform_int_distribution<std::int32_t>(0, p)(rng));
    std::sort(bounds.begin(), bounds.end());
    OutputRecords output;
    output.shape = a.shape;
    std::int64_t blocks = 0, products = 0;
    for (std::size_t r = 0; r + 1 < bounds.size(); ++r) {
      auto slice = backend->slice_rows(*am, bounds[r], bounds[r + 1]);
      blocks += slice->blocks();
      products += backend->block_products(*slice, *bm);
      const auto pattern = backend->symbolic(*slice, *bm);
      AppendingSink sink(output);
      kernels::NumericOptions options;
      options.chunk_bytes = c % 3 == 0 ? 1 : std::int64_t{256} << 20;
      backend->numeric(*slice, *bm, *pattern, sink, options);
    }
    const ProductRun expected = multiply(a, b, BackendKind::reference);
    EXPECT_EQ(blocks, a_blocks) << what;
    EXPECT_EQ(products, expected.block_products) << what;
    ASSERT_TRUE(expected.output.bytes == output.bytes) << what << ": " << compare_outputs(expected.output, output);
  }
  // The host build (the fallback) is never asked to build whole inputs.
  g_cuda.build = CudaChoices::Build::host;
  auto backend = cuda_backend();
  const InputRecords a = random_blocks(random_spec(rng, 8), rng);
  MemoryRecordSource a_source(a), b_source(a);
  EXPECT_FALSE(backend->builds_whole_inputs(a_source, b_source));
}

// kernels::CudaStart pins the staging slots beside the context; the first backend made on that GPU
// takes them (its steps say so) and reads, uploads and copies back through them; a later backend
// pins its own, and a start whose slots no backend took releases them. Records of several 2 MiB pieces, read by 4
// threads; one-tile chunks through the copy-back.
TEST_F(CudaBackend, StagingPinnedByTheWarmUpCarriesTheNextBackendsWork) {
  std::mt19937_64 rng(36);
  RandomSpec a_spec;
  a_spec.n = 3200;  // 100 block-rows of m = 32: 2056-byte records, 1020 a piece
  a_spec.m = 32;
  a_spec.density = 0.5;
  a_spec.zero_block_fraction = 0.05;
  RandomSpec b_spec = a_spec;
  b_spec.density = 0.03;
  const InputRecords a = random_blocks(a_spec, rng);
  const InputRecords b = random_blocks(b_spec, rng);
  ASSERT_GT(a.bytes.size(), std::size_t{4} * (std::size_t{2} << 20));
  const ProductRun expected = multiply(a, b, BackendKind::reference);
  const std::int32_t p = a.shape.block_rows();
  auto dup = [](std::int32_t i, std::int32_t j) { return "duplicate (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };

  kernels::CudaStart start(true);
  start.start_devices({0}, static_cast<std::int64_t>(a.bytes.size() + b.bytes.size()), 4);
  for (int made = 0; made < 2; ++made) {
    kernels::CudaConfig config;
    config.threads = 4;
    auto backend = start.make_backend(config);
    EXPECT_EQ(backend->steps().setup_staging_registered.measured, made == 0) << "backend " << made;
    MemoryRecordSource a_source(a), b_source(b);
    const auto am = backend->build(a_source, {0, p, OperandRole::left, dup});
    const auto bm = backend->build(b_source, {0, p, OperandRole::right, dup});
    EXPECT_EQ(backend->block_products(*am, *bm), expected.block_products);
    const auto pattern = backend->symbolic(*am, *bm);
    for (const std::int64_t chunk_bytes : {std::int64_t{1}, std::int64_t{256} << 20}) {
      OutputRecords output;
      output.shape = a.shape;
      AppendingSink sink(output);
      kernels::NumericOptions options;
      options.chunk_bytes = chunk_bytes;
      (void)backend->numeric(*am, *bm, *pattern, sink, options);
      ASSERT_TRUE(expected.output.bytes == output.bytes)
          << "backend " << made << ", chunks of " << chunk_bytes << " bytes: " << compare_outputs(expected.output, output);
    }
  }
  // A run that chose another backend gives the slots back with its start; a start that began no
  // device prepares nothing.
  {
    kernels::CudaStart unused(true);
    unused.start_devices({0}, 1, 1);
  }
  kernels::CudaStart bare(true);
  EXPECT_FALSE(bare.make_backend({})->steps().setup_staging_registered.measured);
}

// A team's backends copy operands from each other (between GPUs: peer copies): B and a slice of A
// built on one backend, copied to another (the second GPU where there is one, else a second
// backend on the same GPU), multiply there exactly as the reference does, in sparse and dense
// paths and chunk sizes down to one tile.
TEST_F(CudaBackend, OperandsCopiedToAnotherBackendMultiplyAsTheirOriginals) {
  std::mt19937_64 rng(39);
  TwoGpus gpus;
  for (int c = 0; c < 24; ++c) {
    choose_path_of_case(c);
    const RandomSpec spec = random_spec(rng, 24);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    const std::int32_t p = a.shape.block_rows();
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m);
    auto first = gpus.backend();
    auto second = gpus.backend(true);
    auto dup = [](std::int32_t i, std::int32_t j) { return "duplicate (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };
    MemoryRecordSource a_source(a), b_source(b);
    const auto bm = first->build(b_source, {0, p, OperandRole::right, dup});
    const auto am = first->build(a_source, {0, p, OperandRole::left, dup});
    const std::int32_t cut = std::uniform_int_distribution<std::int32_t>(0, p)(rng);
    const auto b_copy = second->copy_operand(*bm);
    const auto a_rest = second->copy_operand(*first->slice_rows(*am, cut, p));
    const auto a_head = first->slice_rows(*am, 0, cut);
    EXPECT_GT(second->counters().bytes_from_peers, 0) << what;
    OutputRecords output;
    output.shape = a.shape;
    std::int64_t products = 0;
    for (const auto& [backend, rows, right] : {std::make_tuple(first.get(), a_head.get(), bm.get()),
                                               std::make_tuple(second.get(), a_rest.get(), b_copy.get())}) {
      products += backend->block_products(*rows, *right);
      const auto pattern = backend->symbolic(*rows, *right);
      AppendingSink sink(output);
      kernels::NumericOptions options;
      options.chunk_bytes = c % 4 == 0 ? 1 : std::int64_t{256} << 20;
      backend->numeric(*rows, *right, *pattern, sink, options);
    }
    const ProductRun expected = multiply(a, b, BackendKind::reference);
    EXPECT_EQ(products, expected.block_products) << what;
    ASSERT_TRUE(expected.output.bytes == output.bytes) << what << ": " << compare_outputs(expected.output, output);
  }
}

}  // namespace
}  // namespace blockmm::testing
