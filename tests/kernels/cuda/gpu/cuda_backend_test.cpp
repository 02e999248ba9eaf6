// The cuda backend against the reference backend (random and fixed cases, both kernels),
// chunking under a tiny memory budget, and byte identity with the cpu backend. Every test
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
#include "kernels/cuda_start.hpp"
#include "support/dense_reference.hpp"
#include "support/multiply.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using kernels::BackendKind;
using kernels::CudaChoices;

// The choices the cuda backend runs with in the current test (its config, not the environment).
CudaChoices g_cuda;

// GPUs CUDA sees in this process (one CudaStart a process, as blockmm has).
int gpu_count() {
  static kernels::CudaStart probe(true);
  return probe.device_count();
}

// A cuda backend on GPU 0 with the current choices and `budget`.
std::unique_ptr<kernels::Backend> cuda_backend(std::int64_t budget = 0) {
  return make_test_backend(BackendKind::cuda, budget, g_cuda);
}

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device visible (or a build without CUDA)";
    g_cuda = {};
  }
  void TearDown() override { g_cuda = {}; }
};

// Appends the tiles it is given (each range's, in order) to one output.
class AppendingSink final : public RecordSink {
 public:
  explicit AppendingSink(OutputRecords& out) : out_(out), start_(out.size()) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    if (start_ + first_tile != out_.size()) throw std::logic_error("tiles out of order at " + std::to_string(first_tile));
    out_.bytes.insert(out_.bytes.end(), records, records + count * out_.stride());
  }

 private:
  OutputRecords& out_;
  std::int64_t start_;
};

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

// `path`, when given, must appear in the backend's description of the run (which dense path ran).
void expect_same(const InputRecords& a, const InputRecords& b, const std::string& what, std::int64_t chunk_bytes,
                 std::int64_t budget = 0, const std::string& path = "") {
  const ProductRun expected = multiply(a, b, BackendKind::reference);
  const ProductRun actual = multiply(a, b, BackendKind::cuda, chunk_bytes, budget, g_cuda);
  ASSERT_TRUE(expected.output.bytes == actual.output.bytes)
      << what << ": " << compare_outputs(expected.output, actual.output);
  EXPECT_EQ(expected.layout.row_ptr, actual.layout.row_ptr) << what;
  EXPECT_EQ(expected.block_products, actual.block_products) << what;
  if (!path.empty() && expected.layout.tiles() > 0)
    EXPECT_NE(actual.device.find(path), std::string::npos) << what << ": ran on " << actual.device;
}

void random_cases(int cases, std::uint64_t seed, std::int32_t max_block_rows, const std::string& path = "") {
  std::mt19937_64 rng(seed);
  for (int c = 0; c < cases; ++c) {
    const RandomSpec spec = random_spec(rng, max_block_rows);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = c % 5 == 0 ? a : random_blocks(spec, rng);
    // Every third case with one-tile chunks: many chunks through the pipeline.
    expect_same(a, b, "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m),
                c % 3 == 0 ? 1 : std::int64_t{256} << 20, 0, path);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

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

TEST_F(CudaBackend, GenericKernelMatchesReferenceOnRandomCases) {
  g_cuda.generic_kernel = true;
  random_cases(120, 777, 24);
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
    EXPECT_EQ(backend->step_seconds().count("setup: staging registered"), made == 0 ? 1u : 0u) << "backend " << made;
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
  EXPECT_EQ(bare.make_backend({})->step_seconds().count("setup: staging registered"), 0u);
}

// A team's backends copy operands from each other (between GPUs: peer copies): B and a slice of A
// built on one backend, copied to another (the second GPU where there is one, else a second
// backend on the same GPU), multiply there exactly as the reference does, in sparse and dense
// paths and chunk sizes down to one tile.
TEST_F(CudaBackend, OperandsCopiedToAnotherBackendMultiplyAsTheirOriginals) {
  std::mt19937_64 rng(39);
  kernels::CudaStart start(true);
  const int other = start.device_count() > 1 ? 1 : 0;
  start.start_devices({0, other}, 1 << 20, 2);
  for (int c = 0; c < 24; ++c) {
    g_cuda = {};
    if (c % 3 == 1) g_cuda.dense = CudaChoices::Dense::always;
    if (c % 3 == 2) g_cuda.dense = CudaChoices::Dense::never;
    const RandomSpec spec = random_spec(rng, 24);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    const std::int32_t p = a.shape.block_rows();
    const std::string what = "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m);
    kernels::CudaConfig config;
    config.choices = g_cuda;
    auto first = start.make_backend(config);
    config.device = other;
    auto second = start.make_backend(config);
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
    // Inputs plus about 3 MiB: B's dense width (8 MB as float64, 2 MB as int8 planes) cannot stay
    // resident in a quarter of that, so columns are tiled.
    const std::int64_t inputs = (a.size() + b.size()) * 48 + 2 * 251 * 4;
    const ProductRun tiled = multiply(a, b, BackendKind::cuda, std::int64_t{64} << 10, inputs + (std::int64_t{3} << 20), g_cuda);
    EXPECT_GT(tiled.chunks, 4);
    EXPECT_NE(tiled.device.find(path), std::string::npos) << tiled.device;
    ASSERT_TRUE(reference.output.bytes == tiled.output.bytes) << compare_outputs(reference.output, tiled.output);
  });
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
  // Budget: the inputs on the device plus a tenth of the output.
  const std::int64_t input_bytes = (a.size() + b.size()) * (2 * 16 + 16) + 2 * 201 * 4;
  const std::int64_t output_bytes = static_cast<std::int64_t>(reference.output.bytes.size());
  const ProductRun chunked = multiply(a, b, BackendKind::cuda, std::int64_t{1} << 40, input_bytes + output_bytes / 10);
  EXPECT_GE(chunked.chunks, 10);
  ASSERT_TRUE(reference.output.bytes == chunked.output.bytes) << compare_outputs(reference.output, chunked.output);
}

TEST_F(CudaBackend, BudgetBelowTheInputsIsAClearResourceError) {
  std::mt19937_64 rng(8);
  RandomSpec spec;
  spec.n = 64;
  spec.m = 4;
  spec.density = 0.5;
  const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
  try {
    multiply(a, b, BackendKind::cuda, std::int64_t{1} << 20, 1024);
    FAIL() << "expected a ResourceError";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace blockmm::testing
