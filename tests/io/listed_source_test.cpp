// io::ListedRecordSource and InputFile::read_keys on real binary files: records picked by number
// (runs, small and large gaps, pieces starting anywhere) and records appended from memory come
// out exactly as the file holds them, from read() and take(); keys match the records.
#include <gtest/gtest.h>

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "support/random_blocks.hpp"

namespace blockmm {
namespace {

// A COL380 binary file of `records`, removed with the object.
class TempInput {
 public:
  explicit TempInput(const InputRecords& records) {
    char name[] = "/tmp/blockmm-listed-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    path_ = name;
    std::ofstream out(path_, std::ios::binary);
    const std::int32_t header[3] = {records.shape.n, records.shape.m, static_cast<std::int32_t>(records.size())};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(records.bytes.data()), static_cast<std::streamsize>(records.bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path_);
  }
  ~TempInput() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string record_text(const InputRecords& r, std::int64_t q) {
  return std::string(reinterpret_cast<const char*>(r.record(q)), static_cast<std::size_t>(r.stride()));
}

// The records `numbers` of `all`, then those of `extra`: the expected contents.
std::vector<std::string> expected(const InputRecords& all, const std::vector<std::int64_t>& numbers,
                                  const InputRecords& extra) {
  std::vector<std::string> out;
  for (std::int64_t n : numbers) out.push_back(record_text(all, n));
  for (std::int64_t q = 0; q < extra.size(); ++q) out.push_back(record_text(extra, q));
  return out;
}

std::vector<std::string> as_texts(const InputRecords& r) {
  std::vector<std::string> out;
  for (std::int64_t q = 0; q < r.size(); ++q) out.push_back(record_text(r, q));
  return out;
}

TEST(ListedRecordSource, PicksRecordsByNumberThenAppendsReceivedOnes) {
  std::mt19937_64 rng(2016);
  const comm::Communicator comm(comm::MpiMode::off, nullptr, nullptr);
  // m = 1 (10-byte records: thousands fit one gap), m = 5, m = 64 (8 KiB: a gap of one record
  // is read through, of two is not).
  for (const std::int32_t m : {1, 5, 64}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 64 ? 40 : 300);
    spec.density = 0.3;
    const InputRecords all = testing::random_blocks(spec, rng);
    const TempInput file_on_disk(all);
    std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
    const std::int64_t k = all.size();
    ASSERT_GT(k, 100);
    for (const double keep : {1.0, 0.5, 0.02}) {
      SCOPED_TRACE("m = " + std::to_string(m) + ", keep " + std::to_string(keep));
      std::vector<std::int64_t> numbers;
      std::bernoulli_distribution take(keep);
      for (std::int64_t q = 0; q < k; ++q)
        if (take(rng)) numbers.push_back(q);
      numbers.push_back(k - 1);  // the last record, whatever was drawn
      numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
      InputRecords extra;  // "received": other records, as bytes
      extra.shape = all.shape;
      for (std::int64_t q = 0; q < 7 && q < k; ++q) extra.bytes.insert(extra.bytes.end(), all.record(q), all.record(q) + all.stride());
      const std::vector<std::string> want = expected(all, numbers, extra);

      io::ListedRecordSource source(*file, numbers, extra);
      ASSERT_EQ(source.size(), static_cast<std::int64_t>(want.size()));
      EXPECT_EQ(source.shape(), all.shape);
      // read() of pieces starting anywhere, across the end of the numbers.
      std::uniform_int_distribution<std::int64_t> at(0, source.size() - 1);
      for (int trial = 0; trial < 20; ++trial) {
        const std::int64_t first = at(rng);
        const std::int64_t count = std::uniform_int_distribution<std::int64_t>(0, source.size() - first)(rng);
        std::vector<std::byte> piece(static_cast<std::size_t>(count * source.stride()));
        source.read(first, count, piece.data());
        for (std::int64_t q = 0; q < count; ++q)
          ASSERT_EQ(std::string(reinterpret_cast<const char*>(piece.data() + q * source.stride()),
                                static_cast<std::size_t>(source.stride())),
                    want[static_cast<std::size_t>(first + q)])
              << "record " << first + q << " of a piece at " << first;
      }
      EXPECT_EQ(as_texts(source.take()), want);
    }
  }
}

TEST(ListedRecordSource, RefusesNumbersOutOfOrder) {
  std::mt19937_64 rng(3);
  testing::RandomSpec spec;
  spec.n = 40;
  spec.m = 4;
  spec.density = 0.5;
  const TempInput file_on_disk(testing::random_blocks(spec, rng));
  const comm::Communicator comm(comm::MpiMode::off, nullptr, nullptr);
  std::unique_ptr<io::InputFile> file = io::open_input(file_on_disk.path(), comm);
  EXPECT_THROW(io::ListedRecordSource(*file, {3, 2}, InputRecords{}), std::logic_error);
  EXPECT_THROW(io::ListedRecordSource(*file, {1, 1}, InputRecords{}), std::logic_error);
  EXPECT_NO_THROW(io::ListedRecordSource(*file, {}, InputRecords{}));
}

TEST(InputFile, ReadKeysGivesEachRecordsRowAndColumn) {
  std::mt19937_64 rng(4);
  const comm::Communicator comm(comm::MpiMode::off, nullptr, nullptr);
  // m = 128: 32 KiB records, 640 of them: two pieces of 16 MiB.
  for (const std::int32_t m : {1, 3, 128}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m == 128 ? 40 : 200);
    spec.density = 0.4;
    spec.shuffle = true;
    const InputRecords all = testing::random_blocks(spec, rng);
    const TempInput file_on_disk(all);
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
  const comm::Communicator comm(comm::MpiMode::off, nullptr, nullptr);
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
  const TempInput file_on_disk(all);
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
