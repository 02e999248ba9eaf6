// InputFile::read_keys on real binary files: the keys match the records, and a bad record is
// reported as the first one whatever the threads.
#include <gtest/gtest.h>

#include <omp.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "support/random_blocks.hpp"
#include "support/temp_input.hpp"

namespace blockmm {
namespace {

TEST(InputFile, ReadKeysGivesEachRecordsRowAndColumn) {
  std::mt19937_64 rng(4);
  const comm::Communicator comm{comm::CommunicatorOptions{}};
  // m = 128: 32 KiB records, 640 of them: two pieces of 16 MiB.
  for (const std::int32_t m : {1, 3, 128}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 128 ? 40 : 200);
    spec.density = 0.4;
    spec.shuffle = true;
    const InputRecords all = testing::random_blocks(spec, rng);
    const testing::TempInput file_on_disk(all, "keys");
    std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
    const std::int64_t k = all.size();
    if (m == 128) {
      ASSERT_GT(k * all.stride(), std::int64_t{16} << 20) << "not more than one piece";
    }
    for (const io::RecordRange range : {io::RecordRange{0, k}, io::RecordRange{k / 3, k / 2}, io::RecordRange{k, 0}}) {
      std::vector<std::int32_t> keys(static_cast<std::size_t>(2 * range.count), -1);
      file->read_keys(range, keys.data());
      for (std::int64_t q = 0; q < range.count; ++q) {
        ASSERT_EQ(keys[2 * q], record_row(all.record(range.first + q))) << "m = " << m << ", record " << range.first + q;
        ASSERT_EQ(keys[2 * q + 1], record_col(all.record(range.first + q))) << "m = " << m << ", record " << range.first + q;
      }
    }
  }
}

// Pieces are read by several threads; a bad record is still reported as one thread reading in
// order reports it: the first one.
TEST(InputFile, ReadKeysReportsTheFirstBadRecordWhateverTheThreads) {
  std::mt19937_64 rng(5);
  const comm::Communicator comm{comm::CommunicatorOptions{}};
  testing::RandomSpec spec;
  spec.m = 1;
  spec.n = 2000;
  spec.density = 0.05;  // 10-byte records, about 200 000 of them: eight 256 KiB pieces
  InputRecords all = testing::random_blocks(spec, rng);
  const std::int64_t k = all.size();
  ASSERT_GT(k * all.stride(), std::int64_t{1} << 20);
  const std::int64_t first_bad = k / 2, second_bad = k - 3;
  set_record_index(all.record(first_bad), spec.n, 0);   // block-row outside [0, p)
  set_record_index(all.record(second_bad), -1, 0);
  const testing::TempInput file_on_disk(all, "keys");
  std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
  std::vector<std::int32_t> keys(static_cast<std::size_t>(2 * k));
  for (int threads : {1, 4}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    try {
      file->read_keys({0, k}, keys.data());
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(": record " + std::to_string(first_bad) + " "), std::string::npos) << e.what();
    }
    omp_set_num_threads(before);
  }
}

}  // namespace
}  // namespace blockmm
