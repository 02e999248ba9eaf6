// The blockmm executable end to end, started as a child process without MPI: every input
// validation rule of DESIGN.md §1 (exit code 3, one message naming the file, the record and the
// value, nothing written), output failures (exit 4), usage (exit 2), --help / --version, the
// JSON stats, and products checked against independent oracles on fixed and random inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <regex>

#include "support/harness.hpp"
#include "support/dense_reference.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

constexpr const char* kErrorPrefix = "blockmm: error: ";

// Numbers that appear after the first "record" in `message`.
std::vector<long long> numbers_after_record(const std::string& message) {
  std::vector<long long> numbers;
  const std::size_t at = message.find("record");
  if (at == std::string::npos) return numbers;
  const std::string rest = message.substr(at);
  static const std::regex number(R"(-?\d+)");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), number); it != std::sregex_iterator(); ++it)
    numbers.push_back(std::stoll(it->str()));
  return numbers;
}

// A failed run: the exit code, exactly one stderr line "blockmm: error: <file>: ..." holding
// every fragment (and, for `records`, the record indices after the word "record"), nothing on
// stdout, and `out_dir` holding exactly `out_dir_entries` (no output, no temporary file).
::testing::AssertionResult failed_cleanly(const RunResult& run, int code, const std::string& file,
                                          const std::vector<std::string>& fragments, const std::string& out_dir,
                                          const std::vector<std::string>& out_dir_entries = {},
                                          const std::vector<long long>& records = {}) {
  auto failure = [&](const std::string& what) {
    return ::testing::AssertionFailure() << what << "\n" << run.describe();
  };
  if (run.timed_out) return failure("timed out");
  if (run.exit_code != code) return failure("expected exit code " + std::to_string(code));
  const std::vector<std::string> lines = split_lines(run.err);
  if (lines.size() != 1) return failure("expected exactly one line on stderr, got " + std::to_string(lines.size()));
  const std::string& line = lines[0];
  const std::string head = kErrorPrefix + file + ": ";
  if (line.rfind(head, 0) != 0) return failure("stderr does not start with '" + head + "'");
  for (const std::string& f : fragments)
    if (line.find(f) == std::string::npos) return failure("message lacks '" + f + "'");
  const std::vector<long long> numbers = numbers_after_record(line);
  for (long long r : records)
    if (std::find(numbers.begin(), numbers.end(), r) == numbers.end())
      return failure("message does not name record " + std::to_string(r));
  if (!run.out.empty()) return failure("unexpected stdout");
  const std::vector<std::string> entries = list_dir(out_dir);
  if (entries != out_dir_entries) {
    std::string listing;
    for (const auto& e : entries) listing += " '" + e + "'";
    return failure("output directory holds:" + listing);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out && run.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

std::vector<std::uint16_t> fill(std::int32_t m, std::uint16_t v) { return std::vector<std::uint16_t>(m * m, v); }

// n = 16, m = 4 (p = 4), 6 records, shuffled order; B a different matrix of the same shape.
InputRecords small_a() {
  return make_records(16, 4, {{2, 1, fill(4, 3)}, {0, 0, fill(4, 1)}, {3, 3, fill(4, 7)},
                              {1, 2, fill(4, 2)}, {0, 3, fill(4, 5)}, {3, 0, fill(4, 65535)}});
}
InputRecords small_b() {
  return make_records(16, 4, {{0, 2, fill(4, 4)}, {3, 1, fill(4, 9)}, {1, 1, fill(4, 6)},
                              {2, 3, fill(4, 8)}, {0, 0, fill(4, 65535)}});
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

class Cli : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-cli"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");
  std::string out = out_dir + "/C.bin";
  std::string a = in_dir + "/A.bin";
  std::string b = in_dir + "/B.bin";

  void SetUp() override {
    write_bytes(a, encode(small_a()));
    write_bytes(b, encode(small_b()));
  }
  std::string put(const std::string& name, const std::vector<std::byte>& bytes) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, bytes);
    return path;
  }
};

// ---------------------------------------------------------------------------------------------
// Input validation: each rule, with the bad file as A and as B.

struct BadFile {
  std::string name;
  std::vector<std::byte> bytes;
  std::vector<std::string> fragments;
  std::vector<long long> records;  // record indices the message must name
};

std::vector<std::byte> header_only(std::int32_t n, std::int32_t m, std::int32_t k) {
  return encode_with_header(n, m, k, {});
}

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

// ---------------------------------------------------------------------------------------------
// Output failures (exit 4) and atomic replacement.

TEST_F(Cli, OutputIntoMissingDirectory) {
  const std::string target = out_dir + "/no/such/dir/C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {}, out_dir));
}

TEST_F(Cli, OutputIntoDirectoryNobodyMayWrite) {
  // /proc takes no new files, not even from root.
  const std::string proc_target = "/proc/blockmm-cli-test-C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, proc_target}), 4, proc_target, {}, out_dir));
  EXPECT_FALSE(path_exists(proc_target));
}

TEST_F(Cli, OutputIntoUnwritableDirectory) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: chmod 555 does not stop root (OutputIntoDirectoryNobodyMayWrite covers exit 4)";
  const std::string locked = scratch.subdir("locked");
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
  const std::string target = locked + "/C.bin";
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {}, locked));
}

TEST_F(Cli, OutputPathIsADirectory) {
  const std::string target = scratch.subdir("out/C.bin");
  EXPECT_TRUE(failed_cleanly(run_blockmm({a, b, target}), 4, target, {"directory"}, out_dir, {"C.bin"}));
  EXPECT_TRUE(list_dir(target).empty());
}

TEST_F(Cli, SuccessReplacesTheTargetNotWhatALinkPointsTo) {
  const std::string victim = scratch / "victim.txt";
  write_text(victim, "must stay\n");
  ASSERT_EQ(::symlink(victim.c_str(), out.c_str()), 0);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, out})));
  struct stat st {};
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the output link was written through instead of replaced";
  const std::vector<std::byte> kept = read_bytes(victim);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(kept.data()), kept.size()), "must stay\n");
  EXPECT_TRUE(read_bytes(out) == encode(sparse_oracle(small_a(), small_b())));
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
}

// ---------------------------------------------------------------------------------------------
// Usage, --help, --version.

TEST_F(Cli, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {a},
      {a, b},
      {a, b, out, out_dir + "/extra"},
      {"--no-such-option", a, b, out},
      {"--backend", "gpu", a, b, out},
      {"--backend", "", a, b, out},
      {"--backend"},
      {"--stats=xml", a, b, out},
      {"--format", "csv", a, b, out},
      {"--threads", "-2", a, b, out},
      {"--threads", "many", a, b, out},
      {"--chunk-size", "12Q", a, b, out},
      {"--chunk-size", "0", a, b, out},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& s : args) joined += " '" + s + "'";
    SCOPED_TRACE("blockmm" + joined);
    const RunResult run = run_blockmm(args);
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    // One short line, as every error (the pointer to --help rides on it).
    const std::vector<std::string> lines = split_lines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.describe();
    EXPECT_EQ(lines[0].rfind(kErrorPrefix, 0), 0u) << run.describe();
    EXPECT_LT(lines[0].size(), 160u) << run.describe();
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
}

// Bad option values name the option and what it takes, in one short line.
TEST_F(Cli, BadOptionValuesNameTheOptionAndTheRange) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {{"--threads", "two"}, {"--threads 'two'", "0", "1024"}},
      {{"--threads", "-1"}, {"--threads '-1'", "0", "1024"}},
      {{"--threads", "1.5"}, {"--threads '1.5'", "1024"}},
      {{"--threads", "99999999999999999999"}, {"--threads 99999999999999999999", "1024"}},
      {{"--chunk-size", "12Q"}, {"--chunk-size '12Q'", "K, M, G or T"}},
      {{"--chunk-size", "lots"}, {"--chunk-size 'lots'"}},
      {{"--mem-budget", "-5G"}, {"--mem-budget '-5G'"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {a, b, out});
    const RunResult run = run_blockmm(args);
    SCOPED_TRACE(c.args[0] + " " + c.args[1]);
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    const std::vector<std::string> lines = split_lines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.describe();
    EXPECT_LT(lines[0].size(), 120u) << run.describe();
    for (const std::string& f : c.fragments) EXPECT_NE(lines[0].find(f), std::string::npos) << f << "\n" << run.describe();
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
  // An environment value is escaped as names are: still one line.
  RunOptions newline;
  newline.set_env = {"BLOCKMM_PROGRESS_INTERVAL=1\n2"};
  const RunResult run = run_blockmm({a, b, out}, newline);
  EXPECT_EQ(run.exit_code, 2) << run.describe();
  EXPECT_EQ(run.err, std::string(kErrorPrefix) +
                         "BLOCKMM_PROGRESS_INTERVAL='1\\x0a2': expected seconds in (0, 86400]\n");
}

// --format takes the names blockmm-convert --to takes: h5/hdf5, bin/binary.
TEST_F(Cli, FormatTakesTheConvertersNames) {
  const RunResult reference = run_blockmm({"-q", a, b, out});
  ASSERT_TRUE(succeeded(reference));
  const std::vector<std::byte> expected = read_bytes(out);
  for (const char* name : {"bin", "binary"}) {
    const std::string target = out_dir + "/C_" + name + ".out";
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", name, a, b, target}))) << name;
    EXPECT_TRUE(read_bytes(target) == expected) << name;
  }
  for (const char* name : {"h5", "hdf5"}) {
    const std::string target = out_dir + "/C_" + name + ".out";
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", name, a, b, target}))) << name;
    const std::vector<std::byte> bytes = read_bytes(target);
    ASSERT_GE(bytes.size(), 8u);
    EXPECT_EQ(std::memcmp(bytes.data(), "\x89HDF\r\n\x1a\n", 8), 0) << name << ": not an HDF5 file";
  }
}

TEST_F(Cli, HelpAndVersion) {
  const RunResult help = run_blockmm({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.describe();
  EXPECT_NE(help.out.find("Usage"), std::string::npos) << help.describe();
  EXPECT_NE(help.out.find("--backend"), std::string::npos);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos);
  EXPECT_EQ(run_blockmm({"-h"}).exit_code, 0);
  const RunResult version = run_blockmm({"--version"});
  EXPECT_EQ(version.exit_code, 0) << version.describe();
  EXPECT_EQ(version.out.rfind("blockmm ", 0), 0u) << version.describe();
  // The first line names the version; the next ones the build's features (run_experience_test.py).
  EXPECT_GE(split_lines(version.out).size(), 2u) << version.describe();
  // --help wins over missing operands and writes nothing.
  EXPECT_EQ(run_blockmm({"--help", a}).exit_code, 0);
  EXPECT_TRUE(list_dir(out_dir).empty());
}

// ---------------------------------------------------------------------------------------------
// Products: fixed cases with hand-computed results, random cases against the oracles.

TEST_F(Cli, FixedCaseWithZeroBlockAndSaturation) {
  // n = 4, m = 2. C(0,1) = A(0,1) x B(1,1) with A(0,1) all zero: must be omitted.
  // C(1,1) = 2 * 65535^2 per value > 2^32 - 1: saturates.
  const InputRecords fa = make_records(4, 2, {{1, 1, fill(2, 65535)}, {0, 1, fill(2, 0)}, {0, 0, {1, 2, 3, 4}}});
  const InputRecords fb = make_records(4, 2, {{1, 0, {1, 0, 0, 1}}, {1, 1, fill(2, 65535)}, {0, 0, {5, 6, 7, 8}}});
  const std::string pa = put("fa.bin", encode(fa)), pb = put("fb.bin", encode(fb));
  std::vector<std::byte> expected;
  auto put_i32 = [&](std::int32_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    expected.insert(expected.end(), p, p + 4);
  };
  for (std::int32_t v : {4, 2, 3}) put_i32(v);
  for (std::int32_t v : {0, 0, 19, 22, 43, 50}) put_i32(v);
  for (std::int32_t v : {1, 0, 65535, 65535, 65535, 65535}) put_i32(v);
  put_i32(1);
  put_i32(1);
  for (int e = 0; e < 4; ++e) put_i32(-1);  // 0xFFFFFFFF
  for (const char* backend : {"cpu", "reference", "auto"}) {
    SCOPED_TRACE(backend);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, out})));
    EXPECT_TRUE(read_bytes(out) == expected);
    EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
  }
}

TEST_F(Cli, RandomProductsMatchTheDenseOracle) {
  std::mt19937_64 rng(20251121);
  int saturated = 0;
  for (int c = 0; c < 10; ++c) {
    testing::RandomSpec spec = testing::random_spec(rng, 16);
    if (c % 3 == 0) {  // dense and large values: saturation must fire
      spec.max_value = 65535;
      spec.density = 1.0;
      spec.zero_value_fraction = 0;
      spec.empty_row_fraction = spec.empty_col_fraction = 0;
    }
    const InputRecords ra = testing::random_blocks(spec, rng);
    const InputRecords rb = testing::random_blocks(spec, rng);
    const std::string pa = put("ra.bin", encode(ra)), pb = put("rb.bin", encode(rb));
    const OutputRecords dense = testing::dense_product(ra, rb);
    ASSERT_EQ(check_canonical(dense), "");
    const OutputRecords sparse = sparse_oracle(ra, rb);
    ASSERT_TRUE(encode(dense) == encode(sparse)) << testing::compare_outputs(dense, sparse);
    for (std::int64_t q = 0; q < dense.size(); ++q)
      for (std::int64_t e = 0; e < dense.shape.block_values(); ++e) saturated += dense.values(q)[e] == 0xFFFFFFFFu;
    const char* backend = c % 2 == 0 ? "cpu" : "reference";
    SCOPED_TRACE("case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m) +
                 " backend " + backend);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, "--threads", std::to_string(1 + c % 3), pa, pb, out})));
    OutputRecords got;
    ASSERT_EQ(load(out, got), "");
    EXPECT_EQ(check_canonical(got), "");
    EXPECT_EQ(testing::compare_outputs(dense, got), "");
    EXPECT_TRUE(read_bytes(out) == encode(dense));
  }
  EXPECT_GT(saturated, 0) << "no random case exercised saturation";
}

TEST_F(Cli, SameFileAsBothOperandsWithRelativePaths) {
  std::mt19937_64 rng(42);
  testing::RandomSpec spec;
  spec.n = 36;
  spec.m = 3;
  spec.density = 0.4;
  const InputRecords sq = testing::random_blocks(spec, rng);
  put("square.bin", encode(sq));
  RunOptions in_dir_cwd;
  in_dir_cwd.cwd = in_dir;
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "square.bin", "square.bin", "AA.bin"}, in_dir_cwd)));
  EXPECT_TRUE(read_bytes(in_dir + "/AA.bin") == encode(testing::dense_product(sq, sq)));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", in_dir + "/square.bin", in_dir + "/square.bin", out})));
  EXPECT_TRUE(read_bytes(out) == encode(testing::dense_product(sq, sq)));
  // No temporary files were left beside either output.
  for (const auto& name : list_dir(in_dir)) EXPECT_EQ(name.find(".blockmm-tmp."), std::string::npos) << name;
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
}

TEST_F(Cli, EmptyInputsGiveAHeaderOnlyOutput) {
  const std::string empty = put("empty.bin", header_only(16, 4, 0));
  const std::string zeros = put("zeros.bin", encode(make_records(16, 4, {{0, 0, fill(4, 0)}, {3, 2, fill(4, 0)}})));
  const std::vector<std::byte> header_only_output = header_only(16, 4, 0);
  const std::vector<std::vector<std::string>> pairs = {{empty, empty}, {empty, b}, {a, empty}, {zeros, b}, {a, zeros}};
  for (const char* backend : {"cpu", "reference"})
    for (const auto& pair : pairs) {
      SCOPED_TRACE(std::string(backend) + " " + pair[0] + " x " + pair[1]);
      ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pair[0], pair[1], out})));
      EXPECT_TRUE(read_bytes(out) == header_only_output) << "size " << file_size(out);
      EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
    }
}

// ---------------------------------------------------------------------------------------------
// --stats.

TEST_F(Cli, StatsJsonIsValidAndCorrect) {
  std::mt19937_64 rng(5);
  testing::RandomSpec spec;
  spec.n = 60;
  spec.m = 5;
  spec.density = 0.3;
  spec.zero_block_fraction = 0.2;  // zero blocks are records but not work
  const InputRecords ra = testing::random_blocks(spec, rng), rb = testing::random_blocks(spec, rng);
  const std::string pa = put("sa.bin", encode(ra)), pb = put("sb.bin", encode(rb));
  const std::string stats_file = scratch / "stats.json";
  const RunResult run = run_blockmm({"-q", "--stats=json", "--stats-file", stats_file, "--backend", "cpu", pa, pb, out});
  ASSERT_TRUE(succeeded(run));
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(run.out)) << run.out;
  const OutputRecords expected = sparse_oracle(ra, rb);
  const std::vector<std::int64_t> work = row_products(ra, rb);
  const std::int64_t products = std::accumulate(work.begin(), work.end(), std::int64_t{0});
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_EQ(j.at("ranks"), 1);
  EXPECT_EQ(j.at("distribution"), "one rank");
  EXPECT_EQ(j.at("n"), 60);
  EXPECT_EQ(j.at("m"), 5);
  EXPECT_EQ(j.at("output_format"), "binary");
  EXPECT_EQ(j.at("blocks").at("a_records"), ra.size());
  EXPECT_EQ(j.at("blocks").at("b_records"), rb.size());
  EXPECT_EQ(j.at("blocks").at("c"), expected.size());
  EXPECT_EQ(j.at("block_products"), products);
  EXPECT_EQ(j.at("useful_macs"), products * 125);
  EXPECT_EQ(j.at("output_bytes"), file_size(out));
  EXPECT_DOUBLE_EQ(j.at("imbalance").get<double>(), 1.0);
  for (const char* phase : {"read", "exchange", "build", "symbolic", "numeric", "write", "commit", "total"}) {
    ASSERT_TRUE(j.at("seconds").at(phase).is_number()) << phase;
    EXPECT_GE(j.at("seconds").at(phase).get<double>(), 0.0) << phase;
  }
  ASSERT_EQ(j.at("per_rank").size(), 1u);
  EXPECT_EQ(j.at("per_rank")[0].at("rank"), 0);
  EXPECT_EQ(j.at("per_rank")[0].at("block_rows"), 12);
  EXPECT_EQ(j.at("per_rank")[0].at("work"), products);
  EXPECT_TRUE(read_bytes(out) == encode(expected));
  // The stats file holds the same document.
  nlohmann::json from_file;
  const std::vector<std::byte> file_bytes = read_bytes(stats_file);
  ASSERT_NO_THROW(from_file = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(file_bytes.data()),
                                                                file_bytes.size())));
  EXPECT_EQ(from_file.at("block_products"), products);
  EXPECT_EQ(from_file.at("blocks"), j.at("blocks"));

  // Plain --stats prints text; without --stats stdout stays empty.
  const RunResult text = run_blockmm({"-q", "--stats", pa, pb, out});
  ASSERT_TRUE(succeeded(text));
  EXPECT_NE(text.out.find("blockmm stats"), std::string::npos) << text.out;
  const RunResult silent = run_blockmm({"-q", pa, pb, out});
  ASSERT_TRUE(succeeded(silent));
  EXPECT_EQ(silent.out, "");
}

TEST_F(Cli, UnwritableStatsFileExitsFour) {
  const std::string target = scratch / "no/such/dir/stats.json";
  const RunResult run = run_blockmm({"-q", "--stats-file", target, a, b, out});
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  const std::vector<std::string> lines = split_lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.describe();
  EXPECT_EQ(lines[0].rfind(std::string(kErrorPrefix) + target, 0), 0u) << run.describe();
}

}  // namespace
}  // namespace blockmm::e2e
