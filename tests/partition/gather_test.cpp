// partition::gather_rows and its helpers on real binary files, without MPI: what a rank of a
// one-node run takes from the files itself. The records of the wanted rows, each exactly once,
// ordered by (block-row, block-column), with any thread count and block order; a file whose
// per-row counts disagree throws; duplicates are found in the owned rows only, the largest first.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "partition/exchange.hpp"
#include "support/random_blocks.hpp"
#include "support/temp_input.hpp"

namespace blockmm {
namespace {

std::string record_text(const InputRecords& r, std::int64_t q) {
  return std::string(reinterpret_cast<const char*>(r.record(q)), static_cast<std::size_t>(r.stride()));
}

std::vector<std::int64_t> row_counts(const InputRecords& all) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(all.shape.block_rows()), 0);
  for (std::int64_t q = 0; q < all.size(); ++q) ++counts[static_cast<std::size_t>(record_row(all.record(q)))];
  return counts;
}

TEST(GatherRows, WantedRowsOnceEachInRowThenColumnOrder) {
  std::mt19937_64 rng(2026);
  const comm::Communicator comm{comm::CommunicatorOptions{}};
  // m = 1 (10-byte records: many bins and pieces), m = 4, m = 40 (3 KiB: one record a run).
  for (const std::int32_t m : {1, 4, 40}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 1 ? 3000 : m == 4 ? 600 : 60);
    spec.density = m == 1 ? 0.02 : 0.2;
    spec.empty_row_fraction = 0.1;
    const InputRecords all = testing::random_blocks(spec, rng);
    const testing::TempInput file_on_disk(all, "gather");
    std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
    const std::int32_t p = all.shape.block_rows();
    for (const double keep : {1.0, 0.5, 0.01, 0.0}) {
      std::vector<char> wanted(static_cast<std::size_t>(p));
      std::bernoulli_distribution take(keep);
      for (char& w : wanted) w = take(rng) ? 1 : 0;
      std::vector<std::string> want;
      for (std::int64_t q = 0; q < all.size(); ++q)
        if (wanted[static_cast<std::size_t>(record_row(all.record(q)))]) want.push_back(record_text(all, q));
      // (row, column) order: the key bytes are little-endian, so order by the decoded key.
      std::sort(want.begin(), want.end(), [](const std::string& x, const std::string& y) {
        const auto* a = reinterpret_cast<const std::byte*>(x.data());
        const auto* b = reinterpret_cast<const std::byte*>(y.data());
        return std::make_pair(record_row(a), record_col(a)) < std::make_pair(record_row(b), record_col(b));
      });
      for (int threads : {1, 3}) {
        SCOPED_TRACE("m = " + std::to_string(m) + ", keep " + std::to_string(keep) + ", " + std::to_string(threads) + " threads");
        const int before = omp_get_max_threads();
        omp_set_num_threads(threads);
        const partition::GroupedRecords got = partition::gather_rows(*file, wanted, row_counts(all));
        omp_set_num_threads(before);
        ASSERT_EQ(got.records.size(), static_cast<std::int64_t>(want.size()));
        for (std::int64_t q = 0; q < got.records.size(); ++q)
          ASSERT_EQ(record_text(got.records, q), want[static_cast<std::size_t>(q)]) << "record " << q;
        ASSERT_EQ(got.row_start.size(), static_cast<std::size_t>(p) + 1);
        for (std::int32_t i = 0; i < p; ++i)
          for (std::int64_t b = got.row_start[i]; b < got.row_start[i + 1]; ++b)
            ASSERT_EQ(record_row(got.records.record(b)), i) << "block " << b;
        // The columns these rows reference.
        std::vector<char> cols(static_cast<std::size_t>(p), 0);
        for (std::int64_t q = 0; q < got.records.size(); ++q) cols[static_cast<std::size_t>(record_col(got.records.record(q)))] = 1;
        EXPECT_EQ(partition::referenced_columns(got.records, p), cols);
      }
    }
  }
}

TEST(GatherRows, CountsThatDisagreeWithTheFileThrow) {
  std::mt19937_64 rng(7);
  const comm::Communicator comm{comm::CommunicatorOptions{}};
  testing::RandomSpec spec;
  spec.n = 400;
  spec.m = 2;
  spec.density = 0.1;
  spec.empty_row_fraction = 0;
  const InputRecords all = testing::random_blocks(spec, rng);
  const testing::TempInput file_on_disk(all, "gather");
  std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
  const std::vector<char> wanted(static_cast<std::size_t>(all.shape.block_rows()), 1);
  for (const std::int64_t change : {-1, 1}) {
    std::vector<std::int64_t> counts = row_counts(all);
    counts[3] += change;
    EXPECT_THROW(partition::gather_rows(*file, wanted, counts), InputError);
  }
}

TEST(GatherRows, DuplicatesOfOwnedRowsOnlyTheLargestFirstAndRowsKept) {
  const comm::Communicator comm{comm::CommunicatorOptions{}};
  // p = 8: row 1 holds (1, 2) twice, row 5 holds (5, 0) and (5, 6) twice each, row 6 holds
  // (6, 1) twice (not among the owned rows below).
  const std::vector<std::int32_t> keys = {1, 2, 5, 0, 6, 1, 1, 2, 5, 6, 5, 0, 6, 1, 5, 6, 0, 0, 2, 3};
  InputRecords all;
  all.shape = {16, 2};
  for (std::size_t e = 0; e < keys.size(); e += 2) {
    std::vector<std::byte> record(static_cast<std::size_t>(all.stride()), std::byte{1});
    set_record_index(record.data(), keys[e], keys[e + 1]);
    all.bytes.insert(all.bytes.end(), record.begin(), record.end());
  }
  const testing::TempInput file_on_disk(all, "gather");
  std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
  const std::vector<char> wanted(8, 1);
  partition::GroupedRecords got = partition::gather_rows(*file, wanted, row_counts(all));
  const auto message = [](std::int32_t i, std::int32_t j) { return std::to_string(i) + "," + std::to_string(j); };
  try {
    partition::check_duplicates(got, 0, 6, message);
    ADD_FAILURE() << "no duplicate found";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "5,6");
  }
  try {
    partition::check_duplicates(got, 0, 2, message);
    ADD_FAILURE() << "no duplicate found";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "1,2");
  }
  EXPECT_NO_THROW(partition::check_duplicates(got, 2, 5, message));
  EXPECT_NO_THROW(partition::check_duplicates(got, 7, 8, message));
  // Rows 0 and 2 only, in order.
  std::vector<char> keep(8, 0);
  keep[0] = keep[2] = 1;
  got = partition::keep_rows(std::move(got), keep);
  ASSERT_EQ(got.records.size(), 2);
  EXPECT_EQ(record_row(got.records.record(0)), 0);
  EXPECT_EQ(record_row(got.records.record(1)), 2);
  EXPECT_EQ(record_col(got.records.record(1)), 3);
  EXPECT_EQ(got.row_start[1], 1);
  EXPECT_EQ(got.row_start[3], 2);
  EXPECT_EQ(got.row_start[8], 2);
}

}  // namespace
}  // namespace blockmm
