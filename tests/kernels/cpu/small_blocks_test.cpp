// The small-block path of the cpu backend (issue 48: avx512_tile_lanes.hpp, the padded row
// accumulator of numeric.cpp, the operand build without CSC), at every level the CPU supports.
// Kernel level: the whole-row kernel and the one-A-block kernel at the padded stride, for
// m = 2..7, A blocks one-plane and two-plane, B rows short and long, accumulators near
// 2^32 - 1, against 64-bit sums saturated once. Whole numeric phase: random m 1-8 with short
// rows (many sparse block-rows) and long ones (a few dense rows), saturation, against the
// reference backend, byte for byte, and the display's tile counter reaching every tile.
#include <gtest/gtest.h>

#include <atomic>
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

class SmallBlocks : public SimdLevelTest {};

// A B operand of `rows` block-rows in CSR, each with `per_row` blocks on random distinct columns
// of [0, columns); values up to `max_b`.
struct RowsOfB {
  std::vector<std::int64_t> row_ptr{0};
  std::vector<std::int32_t> col;
  std::vector<std::uint16_t> values;
};

RowsOfB random_b(std::int32_t m, std::int32_t rows, std::int32_t columns, std::mt19937_64& rng, std::uint32_t max_b) {
  RowsOfB b;
  std::uniform_int_distribution<std::uint32_t> value(0, max_b);
  for (std::int32_t r = 0; r < rows; ++r) {
    const std::int32_t per_row = std::uniform_int_distribution<std::int32_t>(0, r % 3 == 0 ? columns : 4)(rng);
    std::vector<std::int32_t> picked(static_cast<std::size_t>(columns));
    for (std::int32_t c = 0; c < columns; ++c) picked[static_cast<std::size_t>(c)] = c;
    std::shuffle(picked.begin(), picked.end(), rng);
    picked.resize(static_cast<std::size_t>(per_row));
    std::sort(picked.begin(), picked.end());
    for (std::int32_t c : picked) {
      b.col.push_back(c);
      for (std::int32_t q = 0; q < m * m; ++q) b.values.push_back(static_cast<std::uint16_t>(value(rng)));
    }
    b.row_ptr.push_back(static_cast<std::int64_t>(b.col.size()));
  }
  return b;
}

// One output row through the row kernel (and, block by block, through the one-A-block kernel at
// the same padded stride), against the 64-bit reference.
void check_row(SimdLevel level, std::int32_t m, std::mt19937_64& rng) {
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t stride = kernels::cpu::padded_accumulator_stride(level, m);
  ASSERT_GT(stride, 0);
  const std::int32_t b_rows = 6, columns = 9, b_row_begin = 2;
  // A's values: one plane (narrow), two planes (over the limit in one value), or the largest.
  const int kind = std::uniform_int_distribution<int>(0, 2)(rng);
  const std::uint32_t limit = kernels::cpu::planes::one_plane_limit(m);
  const RowsOfB b = random_b(m, b_rows, columns, rng, kind == 2 ? 65535 : 1023);
  const std::int64_t a_count = std::uniform_int_distribution<std::int64_t>(1, 7)(rng);
  std::vector<std::int32_t> a_col(static_cast<std::size_t>(a_count));
  for (auto& k : a_col) k = std::uniform_int_distribution<std::int32_t>(0, b_row_begin + b_rows)(rng);  // some not held
  std::vector<std::uint16_t> a(static_cast<std::size_t>(a_count * mm));
  std::uniform_int_distribution<std::uint32_t> narrow(0, limit), any(0, 65535);
  for (auto& v : a) v = static_cast<std::uint16_t>(kind == 0 ? narrow(rng) : kind == 2 ? 65535 : any(rng));
  // Tiles: columns 0..columns-1, column 4 on no tile (its products are dropped, as for disjoint masks).
  std::vector<std::int32_t> slot(static_cast<std::size_t>(columns));
  std::int32_t tiles = 0;
  for (std::int32_t c = 0; c < columns; ++c) slot[static_cast<std::size_t>(c)] = c == 4 ? -1 : tiles++;
  // 64-byte aligned accumulators, near 2^32 - 1 in some tiles.
  std::vector<std::uint32_t> storage(static_cast<std::size_t>(tiles * stride + 16));
  std::uint32_t* acc = storage.data() + ((64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64) / 4;
  std::vector<std::uint64_t> exact(static_cast<std::size_t>(tiles * stride));
  std::uniform_int_distribution<std::uint32_t> pick(0, 2), near(0, 1u << 20), any32(0, kMax);
  for (std::int64_t q = 0; q < tiles * stride; ++q) {
    const std::uint32_t p = pick(rng);
    acc[q] = p == 0 ? 0 : p == 1 ? any32(rng) : kMax - near(rng);
    exact[static_cast<std::size_t>(q)] = acc[q];
  }
  std::vector<std::uint32_t> second(acc, acc + tiles * stride);
  for (std::int64_t e = 0; e < a_count; ++e) {
    const std::int32_t k = a_col[static_cast<std::size_t>(e)] - b_row_begin;
    if (k < 0 || k >= b_rows) continue;
    for (std::int64_t f = b.row_ptr[static_cast<std::size_t>(k)]; f < b.row_ptr[static_cast<std::size_t>(k) + 1]; ++f) {
      const std::int32_t s = slot[static_cast<std::size_t>(b.col[static_cast<std::size_t>(f)])];
      if (s < 0) continue;
      for (std::int32_t r = 0; r < m; ++r)
        for (std::int32_t c = 0; c < m; ++c) {
          std::uint64_t sum = 0;
          for (std::int32_t l = 0; l < m; ++l)
            sum += std::uint64_t{a[static_cast<std::size_t>(e * mm + r * m + l)]} * b.values[static_cast<std::size_t>(f * mm + l * m + c)];
          exact[static_cast<std::size_t>(s * stride + r * m + c)] += sum;
        }
    }
  }
  const kernels::cpu::RowKernel row = kernels::cpu::row_kernel(level, m);
  ASSERT_NE(row, nullptr);
  row({acc, stride, a.data(), a_col.data(), a_count, b.row_ptr.data(), b.col.data(), b.values.data(), b_row_begin, b_rows,
       slot.data()});
  // The same products block by block, into a second aligned copy (the padded BlockRowTask form).
  std::vector<std::uint32_t> storage2(storage.size());
  std::uint32_t* acc2 = storage2.data() + ((64 - reinterpret_cast<std::uintptr_t>(storage2.data()) % 64) % 64) / 4;
  std::copy(second.begin(), second.end(), acc2);
  const kernels::cpu::BlockRowKernel kernel = kernels::cpu::block_row_kernel(level, m);
  std::vector<std::uint64_t> scratch(static_cast<std::size_t>(mm));
  for (std::int64_t e = 0; e < a_count; ++e) {
    const std::int32_t k = a_col[static_cast<std::size_t>(e)] - b_row_begin;
    if (k < 0 || k >= b_rows) continue;
    const std::int64_t f0 = b.row_ptr[static_cast<std::size_t>(k)];
    kernel({acc2, stride, m, a.data() + e * mm, b.values.data() + f0 * mm, b.col.data() + f0,
            b.row_ptr[static_cast<std::size_t>(k) + 1] - f0, slot.data(), scratch.data()});
  }
  for (std::int32_t t = 0; t < tiles; ++t)
    for (std::int64_t q = 0; q < mm; ++q) {  // lanes past m^2 are the kernel's scratch
      const std::uint64_t x = exact[static_cast<std::size_t>(t * stride + q)];
      const std::uint32_t expected = x > kMax ? kMax : static_cast<std::uint32_t>(x);
      ASSERT_EQ(acc[t * stride + q], expected) << "row kernel, m=" << m << " A kind " << kind << " tile " << t << " value " << q;
      ASSERT_EQ(acc2[t * stride + q], expected) << "block kernel, m=" << m << " A kind " << kind << " tile " << t;
    }
}

TEST_P(SmallBlocks, RowKernelMatchesReference) {
  if (kernels::cpu::padded_accumulator_stride(GetParam(), 3) == 0) GTEST_SKIP() << "no small-block row kernel at this level";
  std::mt19937_64 rng(4800 + static_cast<int>(GetParam()));
  for (std::int32_t m : {2, 3, 5, 6, 7})
    for (int rep = 0; rep < 40; ++rep) {
      check_row(GetParam(), m, rng);
      if (HasFatalFailure()) return;
    }
}

// A x B built on the host, its cpu pattern and the numeric phase at `level` (chunk: bytes).
OutputRecords cpu_numeric(const InputRecords& a, const InputRecords& b, SimdLevel level, std::int64_t chunk) {
  const std::int32_t p = a.shape.block_rows();
  auto dup = [](std::int32_t, std::int32_t) { return std::string("duplicate block"); };
  const BlockMatrix am = operands::build_block_matrix(a, 0, p, operands::OperandRole::left, dup, false);
  const BlockMatrix bm = operands::build_block_matrix(b, 0, p, operands::OperandRole::right, dup, false);
  EXPECT_TRUE(bm.col_ptr.empty());  // no CSC asked for
  const TilePattern pattern = kernels::cpu_symbolic({am, bm});
  OutputRecords out;
  out.shape = a.shape;
  struct Sink final : RecordSink {
    OutputRecords& out;
    explicit Sink(OutputRecords& o) : out(o) {}
    void write(std::int64_t, std::int64_t count, const std::byte* records) override {
      out.bytes.insert(out.bytes.end(), records, records + count * out.stride());
    }
  } sink(out);
  kernels::NumericOptions options;
  options.chunk_bytes = chunk;
  std::atomic<std::int64_t> tiles_computed{0};  // the display's counter: every tile, once
  options.tiles_computed = &tiles_computed;
  kernels::cpu_numeric_at_level(level, {am, bm}, pattern, sink, options);
  EXPECT_EQ(tiles_computed.load(), pattern.tiles());
  return out;
}

// Random m 1-8: short rows (many block-rows, few blocks each) and long ones (a handful of dense
// block-rows, and tiny chunks that split rows into pieces), narrow and full 16-bit values.
TEST_P(SmallBlocks, NumericPhaseMatchesReferenceOnShortAndLongRows) {
  std::mt19937_64 rng(4810 + static_cast<int>(GetParam()));
  for (int c = 0; c < 16; ++c) {
    RandomSpec spec;
    spec.m = 1 + c % 8;
    const bool short_rows = c < 8;
    spec.n = spec.m * (short_rows ? std::uniform_int_distribution<std::int32_t>(40, 90)(rng) : 9);
    spec.density = short_rows ? 0.04 : 0.9;
    spec.max_value = c % 3 == 2 ? 1023 : 65535;
    spec.zero_value_fraction = c % 3 == 0 ? 0.6 : 0;
    spec.empty_row_fraction = c % 5 == 0 ? 0.2 : 0;
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = random_blocks(spec, rng);
    const std::int64_t chunk = c % 3 == 1 ? 2 * record_bytes<std::uint32_t>(spec.m) : std::int64_t{1} << 20;
    const OutputRecords expected = multiply(a, b, kernels::BackendKind::reference, chunk).output;
    const OutputRecords actual = cpu_numeric(a, b, GetParam(), chunk);
    ASSERT_TRUE(expected.bytes == actual.bytes) << "case " << c << " m=" << spec.m << " n=" << spec.n;
  }
}

// Every value 65535, every block present: each output value saturates (m = 2..7, the row kernel).
TEST_P(SmallBlocks, NumericPhaseSaturates) {
  for (std::int32_t m = 2; m <= 7; ++m) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * 5;
    spec.density = 1.0;
    std::mt19937_64 rng(48);
    InputRecords a = random_blocks(spec, rng);
    for (std::int64_t q = 0; q < a.size(); ++q)
      for (std::int64_t v = 0; v < a.shape.block_values(); ++v) reinterpret_cast<std::uint16_t*>(a.record(q) + 8)[v] = 65535;
    const OutputRecords out = cpu_numeric(a, a, GetParam(), std::int64_t{1} << 20);
    ASSERT_EQ(out.size(), 25);
    for (std::int64_t q = 0; q < out.size(); ++q)
      for (std::int64_t v = 0; v < out.shape.block_values(); ++v) ASSERT_EQ(out.values(q)[v], kMax) << "m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, SmallBlocks, ::testing::ValuesIn(kernels::cpu::kAllSimdLevels), simd_level_test_name);

}  // namespace
}  // namespace blockmm::testing
