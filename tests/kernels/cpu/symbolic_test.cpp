// The cpu symbolic phase (kernels/cpu/symbolic.cpp) against a brute-force one: C(i,j) is a tile
// iff some k has a non-zero column c of A(i,k) whose row c of B(k,j) holds a non-zero (the values
// are non-negative, so the sum is then non-zero: the reference backend's exact sums agree, as
// CpuBackend.MatchesReferenceOnRandomCases checks on small cases). Its row forms each get rows
// made for them: banded rows over a narrow column window (finite-element shapes: the window
// bitset, B rows ORed in as words where their columns run together, block by block where they do
// not), short rows scattered over many columns (the stamp and sort), rows with more work than a
// bitset has words (whole B-row bitsets); blocks with zero rows and columns (masks with holes)
// and full ones; one and two threads (per-thread column buffers, copied in chunk order); a rank's
// rows of A and of B.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/host_operands.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

// Block (i, i + d) for each row i and each offset d of `offsets` that lands inside [0, p) (when
// `scatter` is set, columns are drawn at random instead, `offsets.size()` a row); each block's
// values are zero with probability `holes` (none of them is all zero).
InputRecords make_blocks(std::int32_t p, std::int32_t m, const std::vector<std::int32_t>& offsets, bool scatter,
                         double holes, std::mt19937_64& rng) {
  InputRecords r;
  r.shape = {p * m, m};
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<std::int32_t> column(0, p - 1);
  std::uniform_int_distribution<int> value(1, 65535);
  for (std::int32_t i = 0; i < p; ++i) {
    std::vector<std::int32_t> cols;
    for (std::int32_t d : offsets) {
      const std::int32_t j = scatter ? column(rng) : i + d;
      if (j >= 0 && j < p && std::find(cols.begin(), cols.end(), j) == cols.end()) cols.push_back(j);
    }
    for (std::int32_t j : cols) {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(m) * m);
      for (auto& x : v) x = unit(rng) < holes ? 0 : static_cast<std::uint16_t>(value(rng));
      v[static_cast<std::size_t>(rng() % v.size())] = 1;  // never all zero
      const std::size_t at = r.bytes.size();
      r.bytes.resize(at + static_cast<std::size_t>(r.stride()));
      set_record_index(r.bytes.data() + at, i, j);
      std::memcpy(r.bytes.data() + at + 8, v.data(), v.size() * 2);
    }
  }
  return r;
}

// The brute-force pattern of rows [a_lo, a_hi) of A x B's rows [b_lo, b_hi).
TilePattern brute_force_pattern(const InputRecords& a, std::int32_t a_lo, std::int32_t a_hi, const InputRecords& b,
                                std::int32_t b_lo, std::int32_t b_hi) {
  const std::int32_t m = a.shape.m;
  // Per record, its non-zero columns (A) or rows (B), as a set of indices.
  const auto lines = [m](const InputRecords& r, bool columns) {
    std::vector<std::vector<bool>> out(static_cast<std::size_t>(r.size()), std::vector<bool>(static_cast<std::size_t>(m)));
    for (std::int64_t q = 0; q < r.size(); ++q)
      for (std::int32_t x = 0; x < m; ++x)
        for (std::int32_t y = 0; y < m; ++y)
          if (r.values(q)[x * m + y] != 0) out[static_cast<std::size_t>(q)][static_cast<std::size_t>(columns ? y : x)] = true;
    return out;
  };
  const auto a_columns = lines(a, true), b_rows_nonzero = lines(b, false);
  std::vector<std::vector<std::int64_t>> b_rows(static_cast<std::size_t>(b.shape.block_rows()));
  for (std::int64_t q = 0; q < b.size(); ++q) b_rows[static_cast<std::size_t>(record_row(b.record(q)))].push_back(q);
  std::vector<std::set<std::int32_t>> tiles(static_cast<std::size_t>(a_hi - a_lo));
  for (std::int64_t q = 0; q < a.size(); ++q) {
    const std::int32_t i = record_row(a.record(q)), k = record_col(a.record(q));
    if (i < a_lo || i >= a_hi || k < b_lo || k >= b_hi) continue;
    for (std::int64_t f : b_rows[static_cast<std::size_t>(k)]) {
      bool meet = false;
      for (std::int32_t c = 0; c < m && !meet; ++c)
        meet = a_columns[static_cast<std::size_t>(q)][static_cast<std::size_t>(c)] &&
               b_rows_nonzero[static_cast<std::size_t>(f)][static_cast<std::size_t>(c)];
      if (meet) tiles[static_cast<std::size_t>(i - a_lo)].insert(record_col(b.record(f)));
    }
  }
  TilePattern pattern;
  pattern.row_begin = a_lo;
  pattern.row_end = a_hi;
  pattern.row_ptr.assign(1, 0);
  for (const auto& row : tiles) {
    pattern.col.insert(pattern.col.end(), row.begin(), row.end());
    pattern.row_ptr.push_back(static_cast<std::int64_t>(pattern.col.size()));
  }
  return pattern;
}

TilePattern cpu_pattern(int threads, const InputRecords& a, std::int32_t a_lo, std::int32_t a_hi, const InputRecords& b,
                        std::int32_t b_lo, std::int32_t b_hi) {
  kernels::CpuConfig config;
  config.threads = threads;
  const auto backend = kernels::make_cpu_backend(config);
  const auto dup = [](std::int32_t, std::int32_t) { return std::string("duplicate"); };
  MemoryRecordSource a_source(records_in_rows(a, a_lo, a_hi)), b_source(records_in_rows(b, b_lo, b_hi));
  const auto am = backend->build(a_source, {a_lo, a_hi, OperandRole::left, dup});
  const auto bm = backend->build(b_source, {b_lo, b_hi, OperandRole::right, dup});
  return kernels::host_pattern(*backend->symbolic(*am, *bm));
}

void expect_same_pattern(const InputRecords& a, const InputRecords& b, const std::string& what) {
  const std::int32_t p = a.shape.block_rows();
  const int threads = omp_get_max_threads();
  // The whole product, then a rank's rows of A against a part of B's rows (products through B
  // rows outside it are not this panel's).
  for (const auto& [a_lo, a_hi, b_lo, b_hi] : {std::array<std::int32_t, 4>{0, p, 0, p}, {p / 4, p - p / 3, p / 5, p - p / 6}}) {
    const TilePattern expected = brute_force_pattern(a, a_lo, a_hi, b, b_lo, b_hi);
    for (int t : {1, 2}) {
      const TilePattern actual = cpu_pattern(t, a, a_lo, a_hi, b, b_lo, b_hi);
      SCOPED_TRACE(what + ", rows [" + std::to_string(a_lo) + ", " + std::to_string(a_hi) + "), " + std::to_string(t) +
                   " threads");
      ASSERT_EQ(actual.row_ptr, expected.row_ptr);
      ASSERT_TRUE(actual.col == expected.col);
    }
  }
  omp_set_num_threads(threads);  // the cpu backend set the process's count
}

TEST(CpuSymbolic, EveryRowFormMatchesABruteForcePattern) {
  std::mt19937_64 rng(4839);
  for (std::int32_t m : {1, 3, 70}) {
    const bool large = m > 64;  // two mask words; fewer blocks, each of 4900 values
    for (double holes : {0.0, 0.8}) {
      const std::string shape = "m=" + std::to_string(m) + " holes=" + std::to_string(holes);
      // A 2-D five-point stencil on a 40-wide grid: windows of a few words, ~25 products a row.
      const std::vector<std::int32_t> stencil = {-40, -1, 0, 1, 40};
      const std::int32_t banded_p = large ? 160 : 2400;
      expect_same_pattern(make_blocks(banded_p, m, stencil, false, holes, rng),
                          make_blocks(banded_p, m, stencil, false, holes, rng), "banded " + shape);
      // The same with every column of a row in a word of its own (no runs: the B rows' words
      // are not kept, each block sets its bit).
      const std::vector<std::int32_t> spread = {-128, -64, 0, 64, 128};
      expect_same_pattern(make_blocks(banded_p, m, spread, false, holes, rng),
                          make_blocks(banded_p, m, spread, false, holes, rng), "banded, no runs " + shape);
      // A few blocks a row anywhere: a window of the whole width, wider than the work.
      const std::vector<std::int32_t> few(large ? 2 : 4, 0);
      const std::int32_t scattered_p = large ? 600 : 3000;
      expect_same_pattern(make_blocks(scattered_p, m, few, true, holes, rng),
                          make_blocks(scattered_p, m, few, true, holes, rng), "scattered " + shape);
      // Rows of many blocks: work far past a bitset's two words.
      const std::vector<std::int32_t> many(large ? 10 : 30, 0);
      const std::int32_t heavy_p = large ? 70 : 90;
      expect_same_pattern(make_blocks(heavy_p, m, many, true, holes, rng), make_blocks(heavy_p, m, many, true, holes, rng),
                          "heavy " + shape);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace blockmm::testing
