// partition/relabel.hpp: when the compact labels are used, that they are the sorted distinct
// indices of both files, that relabelled records map back to the file's, and that the panels'
// file rows tile [0, p) whatever the rank bounds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "partition/relabel.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::partition {
namespace {

TEST(Relabel, AutoRelabelsOnlyWhenRowsOutnumberTheRecords) {
  const auto automatic = RelabelMode::automatic;
  EXPECT_FALSE(should_relabel(automatic, kRelabelMinRows - 1, 1, 1));  // small p: never
  EXPECT_TRUE(should_relabel(automatic, kRelabelMinRows, 1, 1));
  const std::int64_t k = 1000000;
  EXPECT_FALSE(should_relabel(automatic, kRelabelRowsPerRecord * 2 * k, k, k));
  EXPECT_TRUE(should_relabel(automatic, kRelabelRowsPerRecord * 2 * k + 1, k, k));
  EXPECT_FALSE(should_relabel(automatic, std::int64_t{1} << 30, 0, 5));  // the empty product builds nothing
  EXPECT_TRUE(should_relabel(RelabelMode::on, 4, 100, 100));
  EXPECT_FALSE(should_relabel(RelabelMode::off, std::int64_t{1} << 30, 1, 1));
}

// Every split of d labels over 1..5 ranks: the file rows are contiguous, start at 0, end at p,
// and each label's row falls in the panel of the rank that owns the label.
TEST(Relabel, PanelsFileRowsTileTheMatrix) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int32_t p = std::uniform_int_distribution<std::int32_t>(1, 1000)(rng);
    std::set<std::int32_t> set;
    const int d = std::uniform_int_distribution<int>(1, std::min(p, 20))(rng);
    while (static_cast<int>(set.size()) < d) set.insert(std::uniform_int_distribution<std::int32_t>(0, p - 1)(rng));
    const std::vector<std::int32_t> labels(set.begin(), set.end());
    const int ranks = std::uniform_int_distribution<int>(1, 5)(rng);
    std::vector<std::int32_t> bounds = {0};
    for (int r = 1; r < ranks; ++r) bounds.push_back(std::uniform_int_distribution<std::int32_t>(0, d)(rng));
    bounds.push_back(d);
    std::sort(bounds.begin(), bounds.end());
    std::int32_t expected_begin = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto [begin, end] = file_rows(labels, p, bounds[r], bounds[r + 1]);
      ASSERT_EQ(begin, expected_begin) << "trial " << trial << ", rank " << r;
      ASSERT_LE(begin, end);
      for (std::int32_t x = bounds[r]; x < bounds[r + 1]; ++x) {
        EXPECT_GE(labels[x], begin);
        EXPECT_LT(labels[x], end);
      }
      expected_begin = end;
    }
    EXPECT_EQ(expected_begin, p);
  }
}

std::string write_input(const std::string& path, const InputRecords& records) {
  std::ofstream out(path, std::ios::binary);
  const std::int32_t header[3] = {records.shape.n, records.shape.m, static_cast<std::int32_t>(records.size())};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(records.bytes.data()), static_cast<std::streamsize>(records.bytes.size()));
  return path;
}

InputRecords random_records(std::int32_t n, std::int32_t m, int count, std::mt19937_64& rng) {
  std::set<std::pair<std::int32_t, std::int32_t>> blocks;
  std::uniform_int_distribution<std::int32_t> index(0, n / m - 1);
  while (static_cast<int>(blocks.size()) < count) blocks.insert({index(rng), index(rng)});
  std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> list;
  for (const auto& [i, j] : blocks)
    list.emplace_back(i, j, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(i ^ j)));
  std::shuffle(list.begin(), list.end(), rng);
  return testing::make_records(n, m, list);
}

// One rank: the labels are the sorted distinct indices of both files; the relabelled operands
// have n = d m and the files' records in the files' order, each mapping back to its own block.
TEST(Relabel, LabelsAreTheSortedIndicesAndMapBack) {
  comm::Communicator comm{comm::CommunicatorOptions{}};
  std::mt19937_64 rng(1700);
  const std::string dir = ::testing::TempDir();
  for (const std::int32_t m : {1, 3}) {
    const std::int32_t n = (std::int32_t{1} << 28) / m * m;
    const InputRecords a = random_records(n, m, 40, rng), b = random_records(n, m, 25, rng);
    const std::string pa = write_input(dir + "/relabel_a.bin", a), pb = write_input(dir + "/relabel_b.bin", b);
    auto fa = io::open_input(pa, comm), fb = io::open_input(pb, comm);
    const Relabelling r = relabel(*fa, *fb, comm);
    std::set<std::int32_t> indices;
    for (const InputRecords* x : {&a, &b})
      for (std::int64_t q = 0; q < x->size(); ++q) {
        indices.insert(record_row(x->record(q)));
        indices.insert(record_col(x->record(q)));
      }
    ASSERT_EQ(*r.labels, std::vector<std::int32_t>(indices.begin(), indices.end()));
    for (const auto& [file, original] : {std::pair<io::InputFile*, const InputRecords*>{r.a.get(), &a}, {r.b.get(), &b}}) {
      EXPECT_EQ(file->header().n, static_cast<std::int32_t>(r.labels->size()) * m);
      EXPECT_EQ(file->header().k, original->size());
      const InputRecords got = file->read_records({0, original->size()});
      ASSERT_EQ(got.size(), original->size());
      for (std::int64_t q = 0; q < got.size(); ++q) {
        const auto [i, j] = file->file_block(record_row(got.record(q)), record_col(got.record(q)));
        EXPECT_EQ(i, record_row(original->record(q)));
        EXPECT_EQ(j, record_col(original->record(q)));
        EXPECT_EQ(std::memcmp(got.values(q), original->values(q), static_cast<std::size_t>(2 * m * m)), 0);
      }
      // A piece, as a backend reads it.
      std::vector<std::byte> piece(static_cast<std::size_t>(3 * got.stride()));
      file->read_records_into({5, 3}, piece.data());
      EXPECT_EQ(std::memcmp(piece.data(), got.record(5), piece.size()), 0);
    }
    std::remove(pa.c_str());
    std::remove(pb.c_str());
  }
}

}  // namespace
}  // namespace blockmm::partition
