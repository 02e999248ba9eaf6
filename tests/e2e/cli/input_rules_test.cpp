// blockmm's input validation end to end, without MPI: every rule of the COL380 binary format
// (docs/formats.md; exit code 3, one message naming the file, the record and the value, nothing
// written), with the bad file as either operand, over an existing output, and for random
// corruptions.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <random>

#include "e2e/cli/cli_fixture.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// Input validation: each rule, with the bad file as A and as B.

struct BadFile {
  std::string name;
  std::vector<std::byte> bytes;
  std::vector<std::string> fragments;
  std::vector<long long> records;  // record indices the message must name
};

// Records of small_a() with the index of record `q` replaced.
std::vector<std::byte> with_index(std::int64_t q, std::int32_t i, std::int32_t j) {
  InputRecords r = small_a();
  set_record_index(r.record(q), i, j);
  return encode(r);
}

std::vector<std::byte> text_bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

std::vector<BadFile> bad_files() {
  const std::vector<std::byte> valid = encode(small_a());  // k = 6, 40-byte records
  const std::int64_t last = small_a().size() - 1;
  std::vector<std::byte> truncated1(valid.begin(), valid.end() - 1);
  std::vector<std::byte> truncated_record(valid.begin(), valid.end() - 40);
  std::vector<std::byte> trailing1 = valid;
  trailing1.push_back(std::byte{0});
  std::vector<std::byte> trailing_record = valid;
  trailing_record.insert(trailing_record.end(), valid.begin() + 12, valid.begin() + 52);
  // k > p^2 with the size consistent with k, so that only the k rule can reject it.
  std::vector<std::byte> too_many(12 + 17 * 40, std::byte{0});
  const std::int32_t too_many_header[3] = {16, 4, 17};
  std::memcpy(too_many.data(), too_many_header, 12);
  std::vector<std::byte> dup_first_last = valid, dup_adjacent = valid;
  {
    InputRecords r = small_a();
    set_record_index(r.record(last), record_row(r.record(0)), record_col(r.record(0)));
    dup_first_last = encode(r);
    InputRecords s = small_a();
    set_record_index(s.record(3), record_row(s.record(2)), record_col(s.record(2)));
    dup_adjacent = encode(s);
  }
  // A duplicate where one copy is an all-zero block still is a duplicate.
  InputRecords zero_dup = make_records(16, 4, {{1, 1, fill(4, 0)}, {2, 2, fill(4, 1)}, {1, 1, fill(4, 3)}});
  return {
      {"empty", {}, {"0 bytes", "12"}, {}},
      {"eleven_bytes", std::vector<std::byte>(11, std::byte{1}), {"11 bytes", "12"}, {}},
      {"n_zero", header_only(0, 4, 0), {"n = 0"}, {}},
      {"n_negative", header_only(-16, 4, 0), {"n = -16"}, {}},
      {"m_zero", header_only(16, 0, 0), {"m = 0"}, {}},
      {"m_negative", header_only(16, -4, 0), {"m = -4"}, {}},
      {"n_not_multiple_of_m", header_only(10, 4, 0), {"n = 10", "m = 4"}, {}},
      {"n_not_multiple_of_m_odd", header_only(16, 5, 0), {"n = 16", "m = 5"}, {}},
      {"k_negative", header_only(16, 4, -1), {"k = -1"}, {}},
      {"k_int_min", header_only(16, 4, INT_MIN), {"k = " + std::to_string(INT_MIN)}, {}},
      {"k_above_p_squared", too_many, {"k = 17", "16"}, {}},
      // Huge k with a tiny file: rejected from the size, nothing allocated from the header.
      {"k_huge_truncated", header_only(32768, 1, 1 << 30), {"truncated", "k = 1073741824"}, {}},
      {"k_max_truncated", header_only(2147483640, 8, INT_MAX), {"truncated"}, {}},
      {"truncated_one_byte", truncated1, {"truncated", std::to_string(truncated1.size())}, {}},
      {"truncated_one_record", truncated_record, {"truncated", std::to_string(truncated_record.size())}, {}},
      {"trailing_one_byte", trailing1, {"trailing", std::to_string(trailing1.size())}, {}},
      {"trailing_one_record", trailing_record, {"trailing", std::to_string(trailing_record.size())}, {}},
      {"row_negative_first", with_index(0, -1, 0), {"-1", "row"}, {0}},
      {"row_p_last", with_index(last, 4, 0), {"4", "row"}, {last}},
      {"row_int_min", with_index(2, INT_MIN, 1), {std::to_string(INT_MIN), "row"}, {2}},
      {"col_negative_middle", with_index(3, 1, -7), {"-7", "col"}, {3}},
      {"col_p_last", with_index(last, 0, 4), {"4", "col"}, {last}},
      {"col_int_max", with_index(1, 0, INT_MAX), {std::to_string(INT_MAX), "col"}, {1}},
      {"duplicate_first_last", dup_first_last, {"duplicate"}, {0, last}},
      {"duplicate_adjacent", dup_adjacent, {"duplicate"}, {2, 3}},
      {"duplicate_zero_block", encode(zero_dup), {"duplicate", "(1, 1)"}, {0, 2}},
      // Text is no blockmm input, said so rather than through the header its bytes would make.
      {"text", text_bytes("hello, this is a text file\n"), {"not a blockmm input (COL380 binary or HDF5)", "hello"}, {}},
      {"short_text", text_bytes("hi\n"), {"not a blockmm input (COL380 binary or HDF5)"}, {}},
      // Line ends and bytes past ASCII are named, not printed: the message stays one line.
      {"text_with_line_ends", text_bytes("ab\r\n\xe9" "cdefghijkl\n"),
       {"not a blockmm input (COL380 binary or HDF5)", "\"ab\\x0d\\x0a\\xe9cdefghi\""}, {}},
  };
}

// Short names in test listings instead of a byte dump of the parameter.
void PrintTo(const BadFile& bad, std::ostream* os) { *os << bad.name; }

class BadInput : public Cli, public ::testing::WithParamInterface<BadFile> {};

TEST_P(BadInput, AsLeftOperand) {
  const BadFile& bad = GetParam();
  const std::string path = put(bad.name + ".bin", bad.bytes);
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", path, b, out}), 3, path, bad.fragments, out_dir, {}, bad.records));
}

TEST_P(BadInput, AsRightOperand) {
  const BadFile& bad = GetParam();
  const std::string path = put(bad.name + ".bin", bad.bytes);
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", a, path, out}), 3, path, bad.fragments, out_dir, {}, bad.records));
}

TEST_P(BadInput, LeavesAnExistingOutputUntouched) {
  const BadFile& bad = GetParam();
  const std::string path = put(bad.name + ".bin", bad.bytes);
  write_text(out, "precious earlier output\n");
  struct stat before {};
  ASSERT_EQ(::stat(out.c_str(), &before), 0);
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", "--backend", "reference", a, path, out}), 3, path, bad.fragments,
                             out_dir, {"C.bin"}, bad.records));
  struct stat after {};
  ASSERT_EQ(::stat(out.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  const std::vector<std::byte> bytes = read_bytes(out);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "precious earlier output\n");
}

INSTANTIATE_TEST_SUITE_P(EveryRule, BadInput, ::testing::ValuesIn(bad_files()),
                         [](const ::testing::TestParamInfo<BadFile>& param_info) { return param_info.param.name; });

TEST_F(Cli, MissingInputFile) {
  const std::string missing = in_dir + "/no-such-file.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({missing, b, out}), 3, missing, {"No such file"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, missing, out}), 3, missing, {"No such file"}, out_dir));
}

TEST_F(Cli, UnreadableInputFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: chmod 000 does not stop root from reading the file";
  ASSERT_EQ(::chmod(a.c_str(), 0), 0);
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, out}), 3, a, {"Permission denied"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({b, a, out}), 3, a, {"Permission denied"}, out_dir));
}

TEST_F(Cli, DirectoryAsInput) {
  const std::string dir = scratch.subdir("a-directory");
  EXPECT_TRUE(failed_cleanly(run_blockmm({dir, b, out}), 3, dir, {"directory"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, dir, out}), 3, dir, {"directory"}, out_dir));
}

TEST_F(Cli, OperandsOfDifferentShape) {
  std::mt19937_64 rng(7);
  testing::RandomSpec spec;
  spec.n = 32;
  spec.m = 4;
  const std::string wider = put("n32.bin", encode(testing::random_blocks(spec, rng)));
  spec.n = 16;
  spec.m = 2;
  const std::string finer = put("m2.bin", encode(testing::random_blocks(spec, rng)));
  spec.n = 16;
  spec.m = 4;
  spec.density = 0;
  const std::string empty_same_shape = put("same.bin", encode(testing::random_blocks(spec, rng)));
  // The right operand is the one that disagrees; the message names both files and both shapes.
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, wider, out}), 3, wider, {a, "32", "16"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({wider, a, out}), 3, a, {wider, "32", "16"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, finer, out}), 3, finer, {a, "m = 2", "m = 4"}, out_dir));
  EXPECT_TRUE(failed_cleanly(run_blockmm({finer, b, out}), 3, b, {finer, "m = 2", "m = 4"}, out_dir));
  // Control: the same check passes for a file of equal shape, even an empty one.
  EXPECT_TRUE(succeeded(run_blockmm({"-q", a, empty_same_shape, out})));
}

// Random valid matrices with one corrupted record at a random place: the message must name
// exactly that record (and for a duplicate, both copies).
TEST_F(Cli, RandomCorruptionsNameTheRecord) {
  std::mt19937_64 rng(0xC0FFEE);
  int cases = 0;
  while (cases < 24) {
    testing::RandomSpec spec = testing::random_spec(rng, 12);
    spec.density = 0.6;
    const InputRecords good = testing::random_blocks(spec, rng);
    if (good.size() < 2) continue;
    ++cases;
    InputRecords bad = good;
    const std::int32_t p = spec.n / spec.m;
    const std::int64_t q = std::uniform_int_distribution<std::int64_t>(0, good.size() - 1)(rng);
    const int kind = std::uniform_int_distribution<int>(0, 4)(rng);
    std::vector<long long> expect_records{q};
    std::string fragment;
    const std::int32_t i = record_row(good.record(q)), j = record_col(good.record(q));
    switch (kind) {
      case 0: set_record_index(bad.record(q), -1 - static_cast<std::int32_t>(rng() % 1000), j); fragment = "row"; break;
      case 1: set_record_index(bad.record(q), p + static_cast<std::int32_t>(rng() % 1000), j); fragment = "row"; break;
      case 2: set_record_index(bad.record(q), i, -1 - static_cast<std::int32_t>(rng() % 1000)); fragment = "col"; break;
      case 3: set_record_index(bad.record(q), i, p + static_cast<std::int32_t>(rng() % 1000)); fragment = "col"; break;
      default: {
        std::int64_t other = q;
        while (other == q) other = std::uniform_int_distribution<std::int64_t>(0, good.size() - 1)(rng);
        set_record_index(bad.record(q), record_row(good.record(other)), record_col(good.record(other)));
        expect_records = {std::min(q, other), std::max(q, other)};
        fragment = "duplicate";
      }
    }
    if (kind < 4) {
      const std::int32_t value = kind < 2 ? record_row(bad.record(q)) : record_col(bad.record(q));
      fragment = std::to_string(value);
    }
    const std::string path = put("corrupt.bin", encode(bad));
    const std::string partner = put("partner.bin", encode(testing::random_blocks(spec, rng)));
    SCOPED_TRACE("case " + std::to_string(cases) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m) +
                 " k=" + std::to_string(good.size()) + " record " + std::to_string(q) + " kind " + std::to_string(kind));
    const bool left = rng() % 2 == 0;
    const RunResult run = run_blockmm({"-q", left ? path : partner, left ? partner : path, out});
    EXPECT_TRUE(failed_cleanly(run, 3, path, {fragment}, out_dir, {}, expect_records));
  }
}

}  // namespace
}  // namespace blockmm::e2e
