// The one-pass build of records in CSR order read from a source in pieces (operands/sorted_build.hpp,
// through build_block_matrix(RecordSource&)) against the build of the same records in memory: the
// same arrays byte for byte, over parts on several threads, pieces and rows of a rank's range;
// sources whose records are out of order or whose reads fail go to the records taken whole, with
// the errors those give; sources that hold their records are taken, never read in pieces.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>

#include "core/error.hpp"
#include "operands/host_build.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {
namespace {

using operands::OperandRole;

// Records in memory handed out as a file source would: in pieces, thread-safe, a read that
// covers record `refused` (if any) failing as a file's check of it does, take() too.
class PieceSource final : public RecordSource {
 public:
  explicit PieceSource(InputRecords records, std::int64_t refused = -1) : records_(std::move(records)), refused_(refused) {}
  MatrixShape shape() const override { return records_.shape; }
  std::int64_t size() const override { return records_.size(); }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    ++reads;
    if (refused_ >= first && refused_ < first + count) throw InputError("record " + std::to_string(refused_) + " refused");
    std::memcpy(dest, records_.record(first), static_cast<std::size_t>(count * stride()));
  }
  InputRecords take() override {
    ++takes;
    if (refused_ >= 0) throw InputError("record " + std::to_string(refused_) + " refused");
    return records_;
  }
  mutable std::atomic<int> reads{0};
  int takes = 0;

 private:
  InputRecords records_;
  std::int64_t refused_;
};

std::string named(std::int32_t i, std::int32_t j) { return std::to_string(i) + "," + std::to_string(j); }

void expect_same(const BlockMatrix& x, const BlockMatrix& y) {
  ASSERT_EQ(x.row_ptr, y.row_ptr);
  ASSERT_TRUE(x.col == y.col);
  ASSERT_TRUE(x.values == y.values);
  ASSERT_TRUE(x.masks == y.masks);
  ASSERT_TRUE(x.col_ptr == y.col_ptr && x.csc_row == y.csc_row && x.csc_block == y.csc_block);
}

// Built from a source in pieces (without a take), from the records in memory (the one-pass build
// there) and from them shuffled (the general build, with its sort: the independent reference):
// the same.
void expect_streamed_build_matches(const InputRecords& sorted, std::int32_t row_begin, std::int32_t row_end,
                                   const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937_64 rng(sorted.size());
  const InputRecords unsorted = shuffled_records(sorted, rng);
  for (OperandRole role : {OperandRole::left, OperandRole::right, OperandRole::plain}) {
    PieceSource source(sorted);
    const BlockMatrix x = operands::build_block_matrix(source, row_begin, row_end, role, named);
    EXPECT_EQ(source.takes, 0);
    EXPECT_GT(source.reads.load(), 0);
    expect_same(x, operands::build_block_matrix(sorted, row_begin, row_end, role, named));
    expect_same(x, operands::build_block_matrix(unsorted, row_begin, row_end, role, named));
  }
}

TEST(SortedSourceBuild, PiecesBuildAsRecordsInMemoryDo) {
  std::mt19937_64 rng(4848);
  for (std::int32_t m : {1, 2, 3, 5, 8, 9, 23}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * (m > 20 ? 23 : 90);
    spec.density = 0.1;
    spec.zero_value_fraction = 0.6;
    spec.zero_block_fraction = 0.1;
    spec.empty_row_fraction = 0.2;
    spec.shuffle = false;
    const InputRecords records = random_blocks(spec, rng);
    const std::int32_t p = records.shape.block_rows();
    expect_streamed_build_matches(records, 0, p, "m=" + std::to_string(m));
    const std::int32_t lo = p / 3, hi = p - p / 4;  // a rank's rows alone
    expect_streamed_build_matches(records_in_rows(records, lo, hi), lo, hi, "rows of m=" + std::to_string(m));
  }
  // Parts on three threads, several pieces each (m = 9: 170 bytes a record, 1542 a piece), all-zero
  // blocks in each part (squeezed out across the parts' boundaries), rows across the boundaries.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  // m = 23: fewer than 64 Ki records, but over 1 MiB of them (parts too).
  for (std::int32_t m : {1, 9, 23}) {
    RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 1 ? 600 : m == 9 ? 380 : 120);
    spec.density = m == 1 ? 0.3 : m == 9 ? 0.5 : 0.1;
    spec.zero_block_fraction = 0.2;
    spec.empty_row_fraction = 0.1;
    spec.shuffle = false;
    const InputRecords records = random_blocks(spec, rng);
    ASSERT_TRUE(records.size() >= (1 << 16) || static_cast<std::int64_t>(records.bytes.size()) >= (1 << 20));
    expect_streamed_build_matches(records, 0, records.shape.block_rows(), "three parts, m=" + std::to_string(m));
  }
  omp_set_num_threads(threads);
}

// No records (k = 0), and three in one row with the other rows empty: built as in memory.
TEST(SortedSourceBuild, EmptyAndTinySources) {
  for (std::int32_t m : {1, 4, 23}) {
    SCOPED_TRACE(m);
    InputRecords none;
    none.shape = {m * 5, m};
    for (OperandRole role : {OperandRole::left, OperandRole::right, OperandRole::plain}) {
      PieceSource empty(none);
      const BlockMatrix x = operands::build_block_matrix(empty, 0, 5, role, named);
      EXPECT_EQ(x.blocks(), 0);
      EXPECT_EQ(x.row_ptr, std::vector<std::int64_t>(6, 0));
      expect_same(x, operands::build_block_matrix(none, 0, 5, role, named));
    }
    // Row 3 alone, its middle block all zero.
    std::vector<std::uint16_t> nonzero(static_cast<std::size_t>(m) * m, 0), zero = nonzero;
    nonzero.back() = 7;
    const InputRecords few = make_records(m * 5, m, {{3, 0, nonzero}, {3, 2, zero}, {3, 4, nonzero}});
    expect_streamed_build_matches(few, 0, 5, "three records in row 3");
    expect_streamed_build_matches(few, 2, 4, "rows [2, 4)");
  }
}

// Records in order but for one, or a read refused: the records are taken whole and built (or
// refused) as they always were. A source that holds its records is taken at once.
TEST(SortedSourceBuild, AnythingButOrderedRecordsGoesToTheRecordsTakenWhole) {
  std::mt19937_64 rng(4949);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  RandomSpec spec;
  spec.m = 1;
  spec.n = 600;
  spec.density = 0.3;
  spec.shuffle = false;
  const InputRecords records = random_blocks(spec, rng);
  ASSERT_GE(records.size(), 1 << 16);
  const std::size_t stride = static_cast<std::size_t>(records.stride());
  const std::int32_t p = records.shape.block_rows();
  const std::int64_t late = records.size() * 2 / 3;  // in the last part; the probe of the ends passes

  InputRecords duplicated = records;  // record `late` twice, side by side
  duplicated.bytes.insert(duplicated.bytes.begin() + static_cast<std::ptrdiff_t>(late * stride), records.record(late),
                          records.record(late) + stride);
  PieceSource with_duplicate(duplicated);
  try {
    operands::build_block_matrix(with_duplicate, 0, p, OperandRole::left, named);
    FAIL() << "duplicate not found";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), named(record_row(records.record(late)), record_col(records.record(late))));
  }
  EXPECT_EQ(with_duplicate.takes, 1);

  InputRecords moved = records;  // the record after `late` moved before it
  std::swap_ranges(moved.record(late), moved.record(late) + stride, moved.record(late + 1));
  PieceSource out_of_order(moved);
  expect_same(operands::build_block_matrix(out_of_order, 0, p, OperandRole::right, named),
              operands::build_block_matrix(moved, 0, p, OperandRole::right, named));
  EXPECT_EQ(out_of_order.takes, 1);

  PieceSource refused(records, late);  // as a file whose record `late` fails its check
  try {
    operands::build_block_matrix(refused, 0, p, OperandRole::left, named);
    FAIL() << "refused record not reported";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "record " + std::to_string(late) + " refused");
  }
  EXPECT_EQ(refused.takes, 1);

  PieceSource past_the_rows(records);  // rows beyond the rank's range: the general build's error
  EXPECT_THROW(operands::build_block_matrix(past_the_rows, 0, record_row(records.record(late)), OperandRole::left, named),
               Error);
  EXPECT_EQ(past_the_rows.takes, 1);

  MemoryRecordSource held(records);
  EXPECT_TRUE(held.in_memory());
  expect_same(operands::build_block_matrix(held, 0, p, OperandRole::left, named),
              operands::build_block_matrix(records, 0, p, OperandRole::left, named));
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace blockmm::testing
