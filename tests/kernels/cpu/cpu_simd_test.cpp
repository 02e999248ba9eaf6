// The cpu block kernels at every instruction-set level this CPU supports (the others are
// skipped with a message), against an independent reference: 64-bit sums saturated once at
// the end. Kernel level: every m from 1 to 64, several B blocks landing on one tile, initial
// accumulators near 2^32 - 1, accumulators spaced apart as in the output records, A blocks
// at and just over the one-plane form's limit (byte_planes.hpp) against the largest B. Whole
// numeric phase: random matrices (odd m up to 64, many tiny chunks so that rows are split
// into pieces) against the reference backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/block_kernels.hpp"
#include "kernels/cpu/byte_planes.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/numeric_level.hpp"
#include "operands/host_build.hpp"
#include "support/multiply.hpp"
#include "support/random_blocks.hpp"
#include "kernels/cpu/simd_level_test.hpp"

namespace blockmm::testing {
namespace {

using kernels::cpu::SimdLevel;

constexpr std::uint32_t kMax = 0xFFFFFFFFu;

class EveryLevel : public SimdLevelTest {};

// at_limit / over_limit: uniform in [0, L] with one value L, where L is the one-plane limit for
// the block size (byte_planes.hpp) or one more; limit_all: every value L.
enum class Values { uniform, sparse, all_max, small, at_limit, over_limit, limit_all };

std::vector<std::uint16_t> random_values(std::size_t count, Values kind, std::int32_t m, std::mt19937_64& rng) {
  std::vector<std::uint16_t> v(count);
  const std::uint32_t limit = kernels::cpu::planes::one_plane_limit(m) + (kind == Values::over_limit ? 1 : 0);
  std::uniform_int_distribution<std::uint32_t> any(0, 65535), small(0, 3), coin(0, 3), up_to_limit(0, limit);
  for (auto& x : v) {
    switch (kind) {
      case Values::uniform: x = static_cast<std::uint16_t>(any(rng)); break;
      case Values::sparse: x = coin(rng) == 0 ? static_cast<std::uint16_t>(any(rng)) : 0; break;
      case Values::all_max: x = 65535; break;
      case Values::small: x = static_cast<std::uint16_t>(small(rng)); break;
      case Values::at_limit:
      case Values::over_limit: x = static_cast<std::uint16_t>(up_to_limit(rng)); break;
      case Values::limit_all: x = static_cast<std::uint16_t>(limit); break;
    }
  }
  if ((kind == Values::at_limit || kind == Values::over_limit) && count > 0)
    v[std::uniform_int_distribution<std::size_t>(0, count - 1)(rng)] = static_cast<std::uint16_t>(limit);
  return v;
}

// One kernel call: A x (count B blocks) into `tiles` accumulators, some B blocks on no tile,
// several on the same tile; compared with the 64-bit reference.
void check_kernel_once(SimdLevel level, std::int32_t m, Values a_kind, Values b_kind, std::mt19937_64& rng) {
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t count = std::uniform_int_distribution<std::int64_t>(1, 6)(rng);
  const std::int32_t columns = 5, tiles = 3;
  std::vector<std::int32_t> slot = {-1, 0, 1, 2, 0};  // block-column -> tile (column 4 repeats tile 0)
  std::vector<std::int32_t> b_col(static_cast<std::size_t>(count));
  for (auto& c : b_col) c = std::uniform_int_distribution<std::int32_t>(0, columns - 1)(rng);
  const std::vector<std::uint16_t> a = random_values(static_cast<std::size_t>(mm), a_kind, m, rng);
  const std::vector<std::uint16_t> b = random_values(static_cast<std::size_t>(count * mm), b_kind, m, rng);

  // Initial accumulators: zero, random, or within one block product of 2^32 - 1. Some calls
  // space the accumulators apart (as the output records do: a 2-value header between tiles);
  // the values between them must stay untouched.
  const std::int64_t acc_stride = mm + (std::uniform_int_distribution<int>(0, 1)(rng) ? 2 : 0);
  std::vector<std::uint32_t> acc(static_cast<std::size_t>(tiles * acc_stride));
  std::uniform_int_distribution<std::uint32_t> any32(0, kMax), near(0, 1u << 20), pick(0, 2);
  for (auto& x : acc) {
    const std::uint32_t p = pick(rng);
    x = p == 0 ? 0 : p == 1 ? any32(rng) : kMax - near(rng);
  }

  // Reference: exact uint64 sums, saturated once.
  std::vector<std::uint64_t> exact(acc.begin(), acc.end());
  add_exact_products(exact, acc_stride, m, m, a.data(), b.data(), b_col.data(), count, slot.data());

  std::vector<std::uint64_t> scratch(static_cast<std::size_t>(mm));
  const kernels::cpu::BlockRowKernel kernel = kernels::cpu::block_row_kernel(level, m);
  kernel({acc.data(), acc_stride, m, a.data(), b.data(), b_col.data(), count, slot.data(), scratch.data()});
  for (std::size_t q = 0; q < acc.size(); ++q) {
    const std::uint32_t expected = exact[q] > kMax ? kMax : static_cast<std::uint32_t>(exact[q]);
    ASSERT_EQ(acc[q], expected) << "m=" << m << " value kinds " << static_cast<int>(a_kind) << ", "
                                << static_cast<int>(b_kind) << " index " << q;
  }
}

TEST_P(EveryLevel, KernelMatchesReferenceForEveryBlockSize) {
  std::mt19937_64 rng(21 + static_cast<int>(GetParam()));
  for (std::int32_t m = 1; m <= 64; ++m) {
    const int repeats = m <= 16 ? 6 : 2;
    for (int rep = 0; rep < repeats; ++rep)
      for (Values kind : {Values::uniform, Values::sparse, Values::all_max, Values::small})
        check_kernel_once(GetParam(), m, kind, kind, rng);
    if (HasFatalFailure()) return;
  }
}

// A blocks narrow enough for one plane and just too wide for it, against uniform B and against
// B at 65535 (the one-plane sums' largest: m L 65535 <= 2^32 - 1, which no lane may wrap).
TEST_P(EveryLevel, KernelMatchesReferenceAtTheOnePlaneLimit) {
  std::mt19937_64 rng(2121 + static_cast<int>(GetParam()));
  for (std::int32_t m = 2; m <= 64; ++m) {
    for (Values a_kind : {Values::at_limit, Values::over_limit, Values::limit_all})
      for (Values b_kind : {Values::uniform, Values::all_max})
        for (int rep = 0; rep < (m <= 16 ? 3 : 1); ++rep) check_kernel_once(GetParam(), m, a_kind, b_kind, rng);
    if (HasFatalFailure()) return;
  }
}

// Which A blocks take one plane: every value at most one_plane_limit(m), which keeps the largest
// corrected sum m L (2^16 - 1) within uint32 (and L within int16).
TEST(BytePlanes, OnePlaneExactlyUpToTheLimit) {
  namespace planes = kernels::cpu::planes;
  EXPECT_EQ(planes::one_plane_limit(2), 32767u);
  EXPECT_EQ(planes::one_plane_limit(8), 8192u);
  EXPECT_EQ(planes::one_plane_limit(64), 1024u);
  for (std::int32_t m = 2; m <= planes::kMaxBlock; ++m) {
    const std::uint32_t limit = planes::one_plane_limit(m);
    EXPECT_LE(static_cast<std::uint64_t>(m) * limit * 65535u, std::uint64_t{0xFFFFFFFFu}) << "m=" << m;
    EXPECT_TRUE(limit == 32767u || static_cast<std::uint64_t>(m) * (limit + 1) * 65535u > 0xFFFFFFFFu) << "m=" << m;
    std::vector<std::uint16_t> a(static_cast<std::size_t>(m * m), 1);
    std::vector<std::uint32_t> words(static_cast<std::size_t>(planes::prepared_words(m)));
    a.back() = static_cast<std::uint16_t>(limit);
    const planes::PreparedA narrow = planes::prepare_a(a.data(), m, words.data());
    EXPECT_TRUE(narrow.one_plane) << "m=" << m;
    // The last row's last pair holds the whole value (in the high half when m is even).
    const std::int32_t p_count = planes::pairs(m);
    const std::uint32_t last_pair = narrow.lo[(m - 1) * p_count + p_count - 1];
    EXPECT_EQ(m % 2 == 0 ? last_pair >> 16 : last_pair & 0xFFFFu, limit) << "m=" << m;
    a.back() = static_cast<std::uint16_t>(limit + 1);
    EXPECT_FALSE(planes::prepare_a(a.data(), m, words.data()).one_plane) << "m=" << m;
  }
}

TEST_P(EveryLevel, KernelSaturatesExactlyAtTheBoundary) {
  // m = 2, A = [[65535, 65535], [65535, 65534]], B = [[65535, x], [2, y]]: C(0,0) = 65535 * 65537
  // = 2^32 - 1 exactly and C(1,0) = 2^32 - 3 without saturation; then one more unit overflows.
  const std::vector<std::uint16_t> a = {65535, 65535, 65535, 65534};
  const std::vector<std::uint16_t> b = {65535, 0, 2, 0, 0, 0, 1, 0};  // two B blocks; the second adds a(r,1)
  const std::vector<std::int32_t> slot = {0, 1};
  std::vector<std::uint64_t> scratch(4);
  const auto kernel = kernels::cpu::block_row_kernel(GetParam(), 2);

  std::vector<std::uint32_t> acc(8, 0);
  const std::int32_t first_only[] = {0};
  kernel({acc.data(), 4, 2, a.data(), b.data(), first_only, 1, slot.data(), scratch.data()});
  EXPECT_EQ(acc[0], kMax);
  EXPECT_EQ(acc[2], kMax - 2);
  EXPECT_EQ(acc[1], 0u);
  // The second block (a(r,1) * 1 into tile 0 again) saturates row 1 from 2^32 - 3 + 65534.
  const std::int32_t both_on_tile0[] = {0, 0};
  std::vector<std::uint32_t> acc2(8, 0);
  kernel({acc2.data(), 4, 2, a.data(), b.data(), both_on_tile0, 2, slot.data(), scratch.data()});
  EXPECT_EQ(acc2[0], kMax);
  EXPECT_EQ(acc2[2], kMax);
  // And starting one below the boundary: kMax - 1 - (65535 * 65535) + 65535 * 65535 = kMax - 1.
  const std::vector<std::uint16_t> one = {65535};
  const std::vector<std::int32_t> slot1 = {0};
  std::vector<std::uint32_t> acc1 = {kMax - 1 - 65535u * 65535u};
  std::vector<std::uint64_t> scratch1(1);
  const std::int32_t col0[] = {0};
  kernels::cpu::block_row_kernel(GetParam(), 1)({acc1.data(), 1, 1, one.data(), one.data(), col0, 1, slot1.data(), scratch1.data()});
  EXPECT_EQ(acc1[0], kMax - 1);
}

// The whole numeric phase at one level against the reference backend.
class VectorSink final : public RecordSink {
 public:
  explicit VectorSink(OutputRecords& out) : out_(out) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    ASSERT_EQ(first_tile * out_.stride(), static_cast<std::int64_t>(out_.bytes.size()));
    out_.bytes.insert(out_.bytes.end(), records, records + count * out_.stride());
  }

 private:
  OutputRecords& out_;
};

// A x B built on the host and its cpu symbolic pattern: what cpu_numeric_at_level takes.
struct HostProduct {
  BlockMatrix a, b;
  TilePattern pattern;
  kernels::Operands operands() const { return {a, b}; }
};

HostProduct host_product(const InputRecords& a, const InputRecords& b) {
  const std::int32_t p = a.shape.block_rows();
  auto dup = [](std::int32_t, std::int32_t) { return std::string("duplicate block"); };
  HostProduct product;
  product.a = operands::build_block_matrix(a, 0, p, operands::OperandRole::left, dup);
  product.b = operands::build_block_matrix(b, 0, p, operands::OperandRole::right, dup);
  product.pattern = kernels::cpu_symbolic(product.operands());
  return product;
}

// The reference backend's product, or the cpu numeric phase's at `level` (through `workspace`
// where one is given).
OutputRecords numeric(const InputRecords& a, const InputRecords& b, bool reference, SimdLevel level,
                      std::int64_t chunk_bytes, kernels::CpuNumericWorkspace* workspace = nullptr) {
  if (reference) return multiply(a, b, kernels::BackendKind::reference, chunk_bytes).output;
  const HostProduct product = host_product(a, b);
  OutputRecords out;
  out.shape = a.shape;
  VectorSink sink(out);
  kernels::NumericOptions options;
  options.chunk_bytes = chunk_bytes;
  kernels::cpu_numeric_at_level(level, product.operands(), product.pattern, sink, options, workspace);
  return out;
}

TEST_P(EveryLevel, NumericPhaseMatchesReferenceBackend) {
  std::mt19937_64 rng(2100 + static_cast<int>(GetParam()));
  const std::int32_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 33, 63, 64};
  for (int c = 0; c < 40; ++c) {
    RandomSpec spec = random_spec(rng, 12);
    spec.m = sizes[c % std::size(sizes)];
    spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(1, spec.m >= 31 ? 4 : 12)(rng);
    if (spec.density == 0) spec.density = 0.5;
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    // Tiny chunks on every other case: rows are then split into one-tile pieces.
    const std::int64_t chunk = c % 2 == 0 ? 1 : std::int64_t{256} << 20;
    const OutputRecords expected = numeric(a, b, true, GetParam(), chunk);
    const OutputRecords actual = numeric(a, b, false, GetParam(), chunk);
    ASSERT_TRUE(expected.bytes == actual.bytes) << "case " << c << " m=" << spec.m << " n=" << spec.n;
  }
}

TEST_P(EveryLevel, NumericPhaseSaturatesOverManyK) {
  // Every value 65535 and every block present: each output value is min(n * 65535^2, 2^32 - 1).
  for (std::int32_t m : {1, 3, 8, 13}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * 9;
    spec.density = 1.0;
    spec.max_value = 65535;
    std::mt19937_64 rng(7);
    InputRecords a = random_blocks(spec, rng);
    for (std::int64_t q = 0; q < a.size(); ++q)
      for (std::int64_t v = 0; v < a.shape.block_values(); ++v)
        reinterpret_cast<std::uint16_t*>(a.record(q) + 8)[v] = 65535;
    const OutputRecords out = numeric(a, a, false, GetParam(), 3 * record_bytes<std::uint32_t>(m));
    ASSERT_EQ(out.size(), 81);
    for (std::int64_t q = 0; q < out.size(); ++q)
      for (std::int64_t v = 0; v < out.shape.block_values(); ++v) ASSERT_EQ(out.values(q)[v], kMax);
    EXPECT_TRUE(out.bytes == numeric(a, a, true, GetParam(), std::int64_t{1} << 20).bytes);
  }
}

// The backend keeps its chunk buffers between numeric calls (ranks sharing rows make up to
// three): a call must not depend on what an earlier one, of another m or chunk size, left in
// them, and a call no larger than the last must reuse them rather than allocate again.
TEST_P(EveryLevel, NumericCallsSharingAWorkspaceMatchTheReference) {
  std::mt19937_64 rng(3500 + static_cast<int>(GetParam()));
  kernels::CpuNumericWorkspace workspace;
  const std::int32_t sizes[] = {8, 3, 16, 1, 5, 8};
  for (int c = 0; c < 12; ++c) {
    RandomSpec spec = random_spec(rng, 10);
    spec.m = sizes[c % std::size(sizes)];
    spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(2, 10)(rng);
    spec.density = c % 3 == 0 ? 1.0 : 0.4;
    spec.max_value = c % 2 == 0 ? 65535 : 1023;  // saturated sums left behind for the next call
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    const std::int64_t chunk = c % 4 == 1 ? 2 * record_bytes<std::uint32_t>(spec.m) : std::int64_t{1} << 20;
    const std::byte* const before = workspace.chunk_buffers[0].data();
    const std::size_t capacity = workspace.chunk_buffers[0].capacity();
    const OutputRecords actual = numeric(a, b, false, GetParam(), chunk, &workspace);
    ASSERT_TRUE(numeric(a, b, true, GetParam(), chunk).bytes == actual.bytes) << "case " << c << " m=" << spec.m;
    if (before != nullptr && capacity >= workspace.chunk_buffers[0].size()) {
      EXPECT_EQ(workspace.chunk_buffers[0].data(), before) << "case " << c << ": the buffer was allocated again";
    }
  }
  EXPECT_GT(workspace.chunk_buffers[0].capacity(), 0u);
}

// Issue 17: the phase's output buffers (and, since the kernels accumulate in place, all its
// accumulators) stay within --chunk-size even when one row has far more tiles than that.
TEST(CpuNumeric, EveryWriteStaysWithinTheChunkSizeEvenForLongRows) {
  RandomSpec spec;
  spec.m = 3;
  spec.n = 3 * 40;  // 40 tiles in every row of the product
  spec.density = 1.0;
  spec.max_value = 65535;
  std::mt19937_64 rng(17);
  const InputRecords a = random_blocks(spec, rng);
  const InputRecords b = random_blocks(spec, rng);
  const HostProduct product = host_product(a, b);
  const kernels::Operands ops = product.operands();
  const TilePattern& pattern = product.pattern;
  const std::int64_t stride = record_bytes<std::uint32_t>(3);

  class SizeSink final : public RecordSink {
   public:
    std::int64_t largest = 0, tiles = 0;
    void write(std::int64_t first_tile, std::int64_t count, const std::byte*) override {
      EXPECT_EQ(first_tile, tiles);
      tiles += count;
      largest = std::max(largest, count);
    }
  } sink;
  kernels::NumericOptions options;
  options.chunk_bytes = 7 * stride;  // 7 tiles: every row is cut into pieces
  const kernels::NumericReport report = kernels::cpu_numeric(ops, pattern, sink, options);
  EXPECT_EQ(sink.tiles, pattern.tiles());
  EXPECT_LE(sink.largest, 7);
  EXPECT_EQ(report.chunks, (pattern.tiles() + 6) / 7);
  // And the bytes are those of the reference backend.
  EXPECT_TRUE(numeric(a, b, false, kernels::cpu::best_simd_level(), 7 * stride).bytes ==
              numeric(a, b, true, SimdLevel::portable, 7 * stride).bytes);
}

TEST(SimdLevels, BestLevelIsAvailableAndPortableAlwaysIs) {
  EXPECT_TRUE(kernels::cpu::simd_level_available(SimdLevel::portable));
  EXPECT_TRUE(kernels::cpu::simd_level_available(kernels::cpu::best_simd_level()));
  EXPECT_THROW(kernels::cpu::block_row_kernel(SimdLevel::portable, 0), std::invalid_argument);
  for (SimdLevel level : kernels::cpu::kAllSimdLevels) {
    if (!kernels::cpu::simd_level_available(level)) {
      EXPECT_THROW(kernels::cpu::block_row_kernel(level, 8), std::invalid_argument);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, EveryLevel, ::testing::ValuesIn(kernels::cpu::kAllSimdLevels), simd_level_test_name);

}  // namespace
}  // namespace blockmm::testing
