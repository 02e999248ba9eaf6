// build_block_matrix (operands/host_build.hpp) against an independent construction: records
// sorted by (i, j) with std::sort, all-zero blocks dropped, CSC built by scanning columns. Long
// shuffled rows (hundreds of blocks, p > 256) exercise the radix sort of row keys; sorted inputs
// the one-pass build of records in CSR order, which must give the general build's matrix byte
// for byte (masks too) or hand over to it; duplicates in long rows must still be found.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "operands/host_build.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using operands::OperandRole;

struct Expected {
  std::vector<std::int64_t> row_ptr;
  std::vector<std::int32_t> col;
  std::vector<std::uint16_t> values;
};

Expected expected_csr(const InputRecords& records) {
  const std::int32_t p = records.shape.block_rows();
  const std::int64_t mm = records.shape.block_values();
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  const auto ij = [&](std::int64_t q) { return std::make_pair(record_row(records.record(q)), record_col(records.record(q))); };
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return ij(x) < ij(y); });
  Expected e;
  e.row_ptr.assign(static_cast<std::size_t>(p) + 1, 0);
  for (std::int64_t q : order) {
    const std::uint16_t* v = records.values(q);
    if (std::all_of(v, v + mm, [](std::uint16_t x) { return x == 0; })) continue;
    ++e.row_ptr[static_cast<std::size_t>(ij(q).first) + 1];
    e.col.push_back(ij(q).second);
    e.values.insert(e.values.end(), v, v + mm);
  }
  std::partial_sum(e.row_ptr.begin(), e.row_ptr.end(), e.row_ptr.begin());
  return e;
}

void expect_matches(const InputRecords& records, const std::string& what) {
  SCOPED_TRACE(what);
  const std::int32_t p = records.shape.block_rows();
  const Expected e = expected_csr(records);
  const BlockMatrix b = operands::build_block_matrix(records, 0, p, OperandRole::right,
                                                      [](std::int32_t, std::int32_t) { return std::string("dup"); });
  ASSERT_EQ(b.row_ptr, e.row_ptr);
  ASSERT_TRUE(std::equal(b.col.begin(), b.col.end(), e.col.begin(), e.col.end()));
  ASSERT_TRUE(std::equal(b.values.begin(), b.values.end(), e.values.begin(), e.values.end()));
  // CSC: for every column, the rows holding it, ascending, pointing at the right CSR entries.
  ASSERT_EQ(b.col_ptr.size(), static_cast<std::size_t>(p) + 1);
  for (std::int32_t j = 0; j < p; ++j) {
    std::vector<std::int32_t> rows;
    for (std::int32_t i = 0; i < p; ++i)
      for (std::int64_t x = e.row_ptr[i]; x < e.row_ptr[i + 1]; ++x)
        if (e.col[static_cast<std::size_t>(x)] == j) rows.push_back(i);
    ASSERT_EQ(b.col_ptr[j + 1] - b.col_ptr[j], static_cast<std::int64_t>(rows.size())) << "column " << j;
    for (std::size_t t = 0; t < rows.size(); ++t) {
      const std::int64_t slot = b.col_ptr[j] + static_cast<std::int64_t>(t);
      ASSERT_EQ(b.csc_row[slot], rows[t]);
      ASSERT_EQ(b.col[b.csc_block[slot]], j);
    }
  }
}

// Per-row block products against a count from the independent CSR, and row ranges cut from a
// left operand (empty ones too) that are the same rows built alone.
TEST(HostOperands, RowProductsAndRowSlicesMatchAnIndependentCsr) {
  std::mt19937_64 rng(2727);
  const auto dup = [](std::int32_t, std::int32_t) { return std::string("dup"); };
  for (int c = 0; c < 60; ++c) {
    const RandomSpec spec = random_spec(rng, 30);
    const InputRecords a = random_blocks(spec, rng), b = random_blocks(spec, rng);
    const std::int32_t p = a.shape.block_rows();
    const BlockMatrix am = operands::build_block_matrix(a, 0, p, OperandRole::left, dup);
    const BlockMatrix bm = operands::build_block_matrix(b, 0, p, OperandRole::right, dup);
    const Expected ea = expected_csr(a), eb = expected_csr(b);
    std::vector<std::int64_t> expected(static_cast<std::size_t>(p), 0);
    for (std::int32_t i = 0; i < p; ++i)
      for (std::int64_t x = ea.row_ptr[i]; x < ea.row_ptr[i + 1]; ++x) {
        const std::int32_t k = ea.col[static_cast<std::size_t>(x)];
        expected[static_cast<std::size_t>(i)] += eb.row_ptr[k + 1] - eb.row_ptr[k];
      }
    const std::vector<std::int64_t> rows = operands::count_row_products(am, bm);
    ASSERT_EQ(rows, expected) << "case " << c;
    EXPECT_EQ(operands::count_block_products(am, bm), std::accumulate(expected.begin(), expected.end(), std::int64_t{0}));
    const std::int32_t lo = std::uniform_int_distribution<std::int32_t>(0, p)(rng);
    const std::int32_t hi = std::uniform_int_distribution<std::int32_t>(lo, p)(rng);
    const BlockMatrix slice = operands::slice_rows(am, lo, hi);
    InputRecords rows_alone;
    rows_alone.shape = a.shape;
    for (std::int64_t q = 0; q < a.size(); ++q)
      if (record_row(a.record(q)) >= lo && record_row(a.record(q)) < hi)
        rows_alone.bytes.insert(rows_alone.bytes.end(), a.record(q), a.record(q) + a.stride());
    const BlockMatrix alone = operands::build_block_matrix(rows_alone, lo, hi, OperandRole::left, dup);
    EXPECT_EQ(slice.row_begin, lo);
    EXPECT_EQ(slice.row_end, hi);
    EXPECT_EQ(slice.row_ptr, alone.row_ptr) << "case " << c;
    EXPECT_TRUE(slice.col == alone.col && slice.values == alone.values && slice.masks == alone.masks) << "case " << c;
  }
  const InputRecords a = random_blocks(random_spec(rng, 10), rng);
  const std::int32_t p = a.shape.block_rows();
  const BlockMatrix am = operands::build_block_matrix(a, 0, p, OperandRole::left, dup);
  EXPECT_THROW(operands::slice_rows(am, 0, p + 1), Error);
}

TEST(BuildBlockMatrix, LongShuffledRowsMatchAnIndependentCsr) {
  std::mt19937_64 rng(2024);
  for (std::int32_t m : {1, 3, 4}) {
    for (const std::int32_t p : {200, 300, 700}) {  // one radix pass (p <= 256), then two
      RandomSpec spec;
      spec.m = m;
      spec.n = m * p;
      spec.density = 0.25;  // about p/4 blocks a row: far above the insertion-sort cut
      spec.max_value = 65535;
      spec.zero_block_fraction = 0.05;
      spec.empty_row_fraction = 0.1;
      expect_matches(random_blocks(spec, rng), "shuffled m=" + std::to_string(m) + " p=" + std::to_string(p));
      spec.shuffle = false;  // row-major order: the sortedness shortcut
      expect_matches(random_blocks(spec, rng), "sorted m=" + std::to_string(m) + " p=" + std::to_string(p));
    }
  }
}

TEST(BuildBlockMatrix, DuplicateInALongRowIsFound) {
  std::mt19937_64 rng(5);
  RandomSpec spec;
  spec.m = 2;
  spec.n = 2 * 400;
  spec.density = 0.3;
  InputRecords records = random_blocks(spec, rng);
  ASSERT_GT(records.size(), 1000);
  // Copy record 0 to the end: the same (i, j) twice, hundreds of keys apart in a long row.
  const std::size_t stride = static_cast<std::size_t>(records.stride());
  records.bytes.insert(records.bytes.end(), records.bytes.begin(), records.bytes.begin() + static_cast<std::ptrdiff_t>(stride));
  const std::int32_t i = record_row(records.record(0)), j = record_col(records.record(0));
  try {
    operands::build_block_matrix(records, 0, 400, OperandRole::left,
                                  [](std::int32_t r, std::int32_t c) { return std::to_string(r) + "," + std::to_string(c); });
    FAIL() << "duplicate not found";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), std::to_string(i) + "," + std::to_string(j));
  }
}

// Records in row-major order take the one-pass build; the same records shuffled take the general
// one. Both must give the same arrays, masks included, and the independent CSR.
void expect_sorted_build_matches(const InputRecords& sorted, std::int32_t row_begin, std::int32_t row_end,
                                 std::mt19937_64& rng, const std::string& what) {
  SCOPED_TRACE(what);
  const InputRecords shuffled = shuffled_records(sorted, rng);
  const auto dup = [](std::int32_t, std::int32_t) { return std::string("dup"); };
  const std::int32_t m = sorted.shape.m;
  for (OperandRole role : {OperandRole::left, OperandRole::right, OperandRole::plain}) {
    const BlockMatrix x = operands::build_block_matrix(sorted, row_begin, row_end, role, dup, false);
    const BlockMatrix y = operands::build_block_matrix(shuffled, row_begin, row_end, role, dup, false);
    ASSERT_EQ(x.row_ptr, y.row_ptr);
    ASSERT_TRUE(x.col == y.col);
    ASSERT_TRUE(x.values == y.values);
    ASSERT_TRUE(x.masks == y.masks);
    if (role == OperandRole::plain) continue;
    // The masks against the values: bit c of a left block's mask (r of a right block's) is set
    // iff its column c (row r) holds a non-zero.
    ASSERT_EQ(x.masks.size(), x.col.size() * static_cast<std::size_t>(mask_words(m)));
    for (std::int64_t b = 0; b < x.blocks(); ++b)
      for (std::int32_t u = 0; u < m; ++u) {
        bool any = false;
        for (std::int32_t w = 0; w < m; ++w)
          any |= x.block_values(b)[role == OperandRole::left ? w * m + u : u * m + w] != 0;
        ASSERT_EQ(any, ((x.block_mask(b)[u / 64] >> (u % 64)) & 1) != 0) << "block " << b << " bit " << u;
      }
  }
}

TEST(BuildBlockMatrix, SortedRecordsBuildAsShuffledOnesDo) {
  std::mt19937_64 rng(4848);
  for (std::int32_t m : {1, 2, 3, 5, 7, 8, 9, 23, 65}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * (m > 20 ? 23 : 90);
    spec.density = 0.1;
    spec.max_value = 65535;
    spec.zero_value_fraction = 0.6;  // zero rows and columns inside blocks: masks with holes
    spec.zero_block_fraction = 0.1;
    spec.empty_row_fraction = 0.2;
    spec.shuffle = false;
    const InputRecords records = random_blocks(spec, rng);
    const std::int32_t p = records.shape.block_rows();
    expect_sorted_build_matches(records, 0, p, rng, "m=" + std::to_string(m));
    // A rank's rows [lo, hi): its records alone, rows before and after it empty.
    const std::int32_t lo = p / 3, hi = p - p / 4;
    expect_sorted_build_matches(records_in_rows(records, lo, hi), lo, hi, rng, "rows of m=" + std::to_string(m));
  }
  // Enough records for parts on several threads, all-zero blocks in each part (squeezed out
  // across the parts' boundaries), rows that cross the boundaries.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  RandomSpec spec;
  spec.m = 1;
  spec.n = 600;
  spec.density = 0.3;
  spec.zero_block_fraction = 0.2;
  spec.empty_row_fraction = 0.1;
  spec.shuffle = false;
  const InputRecords records = random_blocks(spec, rng);
  ASSERT_GT(records.size(), 1 << 16);
  expect_sorted_build_matches(records, 0, 600, rng, "three parts");
  omp_set_num_threads(threads);
}

// Records in order but for one: a duplicate, a record out of order at the end, a row outside
// the rank's range. The general build takes over and finds what it always found.
TEST(BuildBlockMatrix, SortedRecordsWithAFaultGoToTheGeneralBuild) {
  std::mt19937_64 rng(4949);
  RandomSpec spec;
  spec.m = 3;
  spec.n = 3 * 300;
  spec.density = 0.2;
  spec.shuffle = false;
  const InputRecords records = random_blocks(spec, rng);
  const std::size_t stride = static_cast<std::size_t>(records.stride());
  const auto named = [](std::int32_t r, std::int32_t c) { return std::to_string(r) + "," + std::to_string(c); };
  const std::int64_t middle = records.size() / 2;
  InputRecords duplicated = records;  // record `middle` twice, side by side
  duplicated.bytes.insert(duplicated.bytes.begin() + static_cast<std::ptrdiff_t>(middle * stride), records.record(middle),
                          records.record(middle) + stride);
  try {
    operands::build_block_matrix(duplicated, 0, 300, OperandRole::left, named);
    FAIL() << "duplicate not found";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), named(record_row(records.record(middle)), record_col(records.record(middle))));
  }
  InputRecords last_first = records;  // the last record moved to the front
  std::rotate(last_first.bytes.begin(), last_first.bytes.end() - static_cast<std::ptrdiff_t>(stride), last_first.bytes.end());
  expect_matches(last_first, "last record first");
  InputRecords late = records;  // the first record moved to the middle
  std::rotate(late.bytes.begin(), late.bytes.begin() + static_cast<std::ptrdiff_t>(stride),
              late.bytes.begin() + static_cast<std::ptrdiff_t>(middle * stride));
  expect_matches(late, "first record in the middle");
  EXPECT_THROW(operands::build_block_matrix(records, 0, record_row(records.record(records.size() - 1)), OperandRole::left, named),
               Error);
}

// A matrix's arrays hold at most what its records need (all-zero blocks, dropped, may leave
// their room behind): an array of 2 MiB and more once took
// the allocator's 32 MiB mapping threshold as its capacity (for huge pages), up to 16 times the
// address space the blocks need, which ran products under `ulimit -v` out of memory early.
TEST(BuildBlockMatrix, ArraysTakeTheRoomTheirBlocksNeed) {
  std::mt19937_64 rng(5050);
  for (bool shuffle : {false, true}) {  // the one-pass build and the general one
    RandomSpec spec;
    spec.m = 8;
    spec.n = 8 * 400;
    spec.density = 0.15;  // ~24 000 blocks: values of ~3 MiB
    spec.zero_block_fraction = 0.05;
    spec.shuffle = shuffle;
    const InputRecords records = random_blocks(spec, rng);
    const BlockMatrix b = operands::build_block_matrix(records, 0, 400, OperandRole::left,
                                                        [](std::int32_t, std::int32_t) { return std::string("dup"); });
    SCOPED_TRACE(shuffle ? "shuffled" : "sorted");
    ASSERT_GE(b.values.size() * 2, std::size_t{2} << 20);
    const auto records_count = static_cast<std::size_t>(records.size());
    EXPECT_LE(b.values.capacity(), records_count * 64);
    EXPECT_LE(b.col.capacity(), records_count);
    EXPECT_LE(b.masks.capacity(), records_count);
    expect_matches(records, shuffle ? "shuffled" : "sorted");
  }
}

}  // namespace
}  // namespace blockmm::testing
