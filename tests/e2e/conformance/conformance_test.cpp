// Conformance with the COL380 course data (../shared/testdata/col380, see its SOURCES.md): for
// every row of pairs.tsv, blockmm's output is sorted by (i, j), holds no all-zero block, equals
// the course's gold output where one exists (gold files are unsorted: compared by (i, j)), and is
// byte-identical to an independent product (sparse oracle of the test harness, cross-checked
// against the dense oracle of tests/support where n is small enough to expand).
//
// The pairs are those of pairs.tsv as it was when this program was built (col380_stamp.cmake
// compiles its bytes in, and a build after the data appears or changes recompiles it), so that
// the names CTest discovered are the names it runs: the list never goes stale into a pass that
// ran nothing. Data that appeared or changed since the build fails, saying to build again.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "col380_pairs_at_build.hpp"
#include "support/harness.hpp"
#include "support/dense_reference.hpp"

#ifndef BLOCKMM_DEFAULT_COL380_DIR
#define BLOCKMM_DEFAULT_COL380_DIR ""
#endif

namespace blockmm::e2e {
namespace {

// Inputs up to this many records (A and B together) also run through the reference backend.
constexpr std::int64_t kReferenceRecordLimit = 40000;
// Largest n for which the dense oracle (three n x n uint64 arrays) is also run.
constexpr std::int32_t kDenseLimit = 4096;

std::string data_dir() { return env_or("BLOCKMM_COL380_DIR", BLOCKMM_DEFAULT_COL380_DIR); }

std::string absent_message() {
  return "the shared COL380 data is absent (no " + data_dir() +
         "/pairs.tsv; a user's clone has no ../shared): conformance not checked";
}

struct Pair {
  std::string name;  // for the test name
  std::string a, b, gold;  // relative to the data directory; gold empty when there is none
  std::string note;
};

void PrintTo(const Pair& pair, std::ostream* os) { *os << pair.name; }

std::string pairs_at_build() {
  return std::string(reinterpret_cast<const char*>(kCol380PairsAtBuild), sizeof kCol380PairsAtBuild - 1);
}

// pairs.tsv as it is now ("" where absent).
std::string pairs_now() {
  std::ifstream in(data_dir() + "/pairs.tsv", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : "";
}

std::string stale_message(const char* what) {
  return "the COL380 data at " + data_dir() + " " + what +
         " since this test program was built, so CTest's list of its pairs is stale: build again "
         "(cmake --build <build dir>), then run ctest";
}

std::vector<Pair> read_pairs() {
  std::vector<Pair> pairs;
  std::istringstream in(pairs_at_build());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string field;
    while (std::getline(s, field, '\t')) fields.push_back(field);
    if (fields.size() < 3) continue;
    Pair pair;
    pair.a = fields[0];
    pair.b = fields[1];
    pair.gold = fields[2] == "-" ? "" : fields[2];
    pair.note = fields.size() > 3 ? fields[3] : "";
    for (char c : pair.a) pair.name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    pairs.push_back(pair);
  }
  // Without the data at build time, one placeholder: a skip while the data stays absent.
  if (pairs.empty()) pairs.push_back({"Col380DataAbsent", "", "", "", ""});
  return pairs;
}

class Col380 : public ::testing::TestWithParam<Pair> {};

TEST_P(Col380, MatchesGoldAndIndependentProduct) {
  const Pair& pair = GetParam();
  const bool present = path_exists(data_dir() + "/pairs.tsv");
  if (pair.a.empty() && present) FAIL() << stale_message("appeared");
  if (pair.a.empty() || !present) GTEST_SKIP() << absent_message();
  const std::string dir = data_dir();
  RecordProperty("note", pair.note);
  InputRecords a, b;
  ASSERT_EQ(load(dir + "/" + pair.a, a), "");
  ASSERT_EQ(load(dir + "/" + pair.b, b), "");
  ASSERT_EQ(a.shape, b.shape);

  const OutputRecords expected = sparse_oracle(a, b);
  ASSERT_EQ(check_canonical(expected), "");
  if (a.shape.n <= kDenseLimit) {
    // The two oracles share no code: agreeing here makes the sparse one trustworthy on the big pairs.
    const OutputRecords dense = testing::dense_product(a, b);
    ASSERT_TRUE(dense.bytes == expected.bytes) << testing::compare_outputs(dense, expected);
  }
  OutputRecords gold;
  if (!pair.gold.empty()) {
    ASSERT_EQ(load(dir + "/" + pair.gold, gold), "");
    ASSERT_EQ(testing::compare_outputs(gold, expected), "") << "the oracle disagrees with the gold";
  }

  ScratchDir scratch("blockmm-conformance");
  const std::string out = scratch / "C.bin";
  std::vector<std::string> backends{"cpu"};
  if (a.size() + b.size() <= kReferenceRecordLimit) backends.push_back("reference");
  for (const std::string& backend : backends) {
    SCOPED_TRACE("backend " + backend);
    const RunResult run = run_blockmm({"-q", "--backend", backend, dir + "/" + pair.a, dir + "/" + pair.b, out});
    ASSERT_TRUE(run.exit_code == 0 && run.err.empty()) << run.describe();
    OutputRecords got;
    ASSERT_EQ(load(out, got), "");
    EXPECT_EQ(got.shape, a.shape);
    EXPECT_EQ(check_canonical(got), "");
    if (!pair.gold.empty()) {
      EXPECT_EQ(testing::compare_outputs(gold, got), "") << "differs from the gold";
    }
    EXPECT_EQ(got.size(), expected.size());
    EXPECT_TRUE(got.bytes == expected.bytes) << "differs from the independent product";
    EXPECT_EQ(list_dir(scratch.path()), std::vector<std::string>{"C.bin"});
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, Col380, ::testing::ValuesIn(read_pairs()),
                         [](const ::testing::TestParamInfo<Pair>& param_info) { return param_info.param.name; });

// The pairs run are the pairs there are: the data did not appear or change after the build.
TEST(Col380Data, IsTheDataOfTheBuild) {
  if (!path_exists(data_dir() + "/pairs.tsv")) GTEST_SKIP() << absent_message();
  if (!kCol380PresentAtBuild) FAIL() << stale_message("appeared");
  EXPECT_TRUE(pairs_now() == pairs_at_build()) << stale_message("changed");
}

// The comparison used above catches a wrong output: the course data keeps a student's output
// with the right blocks and wrong values.
TEST(Col380Negative, WrongStudentOutputIsRejected) {
  const std::string dir = data_dir();
  const std::string wrong_path = dir + "/aniruddha-deb/test_C_student_WRONG.mat";
  if (!path_exists(dir + "/pairs.tsv")) GTEST_SKIP() << absent_message();
  OutputRecords wrong;
  ASSERT_EQ(load(wrong_path, wrong), "");
  ScratchDir scratch("blockmm-conformance");
  const std::string out = scratch / "C.bin";
  const RunResult run =
      run_blockmm({"-q", dir + "/aniruddha-deb/test_A.mat", dir + "/aniruddha-deb/test_B.mat", out});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  OutputRecords got;
  ASSERT_EQ(load(out, got), "");
  EXPECT_NE(testing::compare_outputs(wrong, got), "");
  EXPECT_FALSE(got.bytes == wrong.bytes);
}

}  // namespace
}  // namespace blockmm::e2e
