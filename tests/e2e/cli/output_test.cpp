// The output promises of the blockmm executable (docs/promises.md), end to end without MPI:
// never writing over an input or the product with the stats (exit 2, nothing written), a failing
// --stats-file failing before the product replaces the old output, an existing output's
// permissions kept and a read-only one refused, a new output's permissions from the umask, output
// names up to NAME_MAX bytes, control characters in names escaped in messages, and names that are
// not UTF-8 carried by the stats JSON. And the multi-threaded writer (io/mapped_writer): the
// product byte for byte with 1, 2 and 8 copying threads and several chunk sizes, the same as
// through pwrite (BLOCKMM_IO=pwrite); /dev/null still written in place; a bad
// BLOCKMM_WRITE_THREADS a usage error before anything is written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

const char* kPrevious = "the previous output, which a failed run must leave alone\n";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffffu;
}

::testing::AssertionResult failed_with(const RunResult& run, int code, const std::string& file,
                                       const std::string& fragment) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << run.describe(); };
  if (run.timed_out) return failure("timed out");
  if (run.exit_code != code) return failure("expected exit code " + std::to_string(code));
  const std::vector<std::string> lines = message_lines(run.err);  // besides the log's header
  if (lines.size() != 1) return failure("expected exactly one message line on stderr");
  if (lines[0].rfind("blockmm: error: " + file + ": ", 0) != 0) return failure("the line does not name " + file);
  if (lines[0].find(fragment) == std::string::npos) return failure("the line lacks '" + fragment + "'");
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out && run.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

class Output : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-output"};
  std::string dir = scratch.subdir("work");
  std::string a = dir + "/A.bin";
  std::string b = dir + "/B.bin";
  std::string out = dir + "/C.bin";
  InputRecords a_records;
  InputRecords b_records;

  void SetUp() override {
    std::mt19937_64 rng(1717);
    testing::RandomSpec spec;
    spec.n = 40;
    spec.m = 4;
    spec.density = 0.4;
    a_records = testing::random_blocks(spec, rng);
    b_records = testing::random_blocks(spec, rng);
    write_bytes(a, encode(a_records));
    write_bytes(b, encode(b_records));
  }
  // The product, checked against the oracle.
  ::testing::AssertionResult holds_product(const std::string& path) const {
    OutputRecords product;
    const std::string why = load(path, product);
    if (!why.empty()) return ::testing::AssertionFailure() << path << ": " << why;
    if (product.bytes != sparse_oracle(a_records, b_records).bytes)
      return ::testing::AssertionFailure() << path << " is not the product";
    return ::testing::AssertionSuccess();
  }
  // The work folder holds exactly the inputs and `extra` (no temporary file, nothing written).
  ::testing::AssertionResult holds_only(std::vector<std::string> extra) const {
    extra.push_back("A.bin");
    extra.push_back("B.bin");
    std::sort(extra.begin(), extra.end());
    const std::vector<std::string> entries = list_dir(dir);
    if (entries == extra) return ::testing::AssertionSuccess();
    std::string listing;
    for (const auto& e : entries) listing += " '" + e + "'";
    return ::testing::AssertionFailure() << "the folder holds:" << listing;
  }
  bool inputs_intact() const { return read_bytes(a) == encode(a_records) && read_bytes(b) == encode(b_records); }
};

// ---------- never over an input, never the stats over the product ----------

TEST_F(Output, StatsFileNamingTheOutputIsAUsageError) {
  RunOptions in_dir;
  in_dir.cwd = dir;
  // Not yet existing, same spelling and another spelling of the same name.
  EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, out, "--stats-file", out}), 2, out, "--stats-file"));
  EXPECT_TRUE(failed_with(run_blockmm({"-q", "A.bin", "B.bin", "C.bin", "--stats-file", "./C.bin"}, in_dir), 2,
                          "./C.bin", "is the output"));
  EXPECT_TRUE(holds_only({}));
  // Existing, through a symlink.
  write_text(out, kPrevious);
  ASSERT_EQ(::symlink(out.c_str(), (dir + "/link.json").c_str()), 0);
  EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, out, "--stats-file", dir + "/link.json"}), 2, dir + "/link.json",
                          "is the output"));
  EXPECT_EQ(slurp(out), kPrevious);
  EXPECT_TRUE(holds_only({"C.bin", "link.json"}));
  // A character device is written in place, so both may be /dev/null (timing runs).
  EXPECT_TRUE(succeeded(run_blockmm({"-q", a, b, "/dev/null", "--stats-file", "/dev/null"})));
}

TEST_F(Output, StatsFileNamingAnInputIsAUsageError) {
  ASSERT_EQ(::symlink(b.c_str(), (dir + "/stats.json").c_str()), 0);
  ASSERT_EQ(::link(a.c_str(), (dir + "/hard.json").c_str()), 0);
  for (const std::string& stats : {a, b, dir + "/stats.json", dir + "/hard.json"}) {
    SCOPED_TRACE(stats);
    EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, out, "--stats-file", stats}), 2, stats, "is the input"));
  }
  EXPECT_TRUE(inputs_intact());
  EXPECT_TRUE(holds_only({"stats.json", "hard.json"}));
}

TEST_F(Output, OutputThatIsAnInputIsAUsageError) {
  RunOptions in_dir;
  in_dir.cwd = dir;
  ASSERT_EQ(::link(a.c_str(), (dir + "/hard.bin").c_str()), 0);
  ASSERT_EQ(::symlink("B.bin", (dir + "/soft.bin").c_str()), 0);
  for (const std::string& target : {a, b, dir + "/hard.bin", dir + "/soft.bin", dir + "/../work/A.bin"}) {
    SCOPED_TRACE(target);
    EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, target}), 2, target, "is the input"));
  }
  EXPECT_TRUE(failed_with(run_blockmm({"-q", "A.bin", "B.bin", "./A.bin"}, in_dir), 2, "./A.bin", "is the input"));
  EXPECT_TRUE(inputs_intact());
  EXPECT_TRUE(holds_only({"hard.bin", "soft.bin"}));
}

// ---------- a failing --stats-file fails before the commit ----------

TEST_F(Output, FailingStatsFileLeavesTheOldOutput) {
  write_text(out, kPrevious);
  const std::string stats = dir + "/no/such/folder/stats.json";
  EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, out, "--stats-file", stats}), 4, stats, "cannot create"));
  EXPECT_EQ(slurp(out), kPrevious) << "the product replaced the old output although the run failed";
  EXPECT_TRUE(holds_only({"C.bin"}));
}

TEST_F(Output, StatsFileIsWrittenWholeBesideTheProduct) {
  write_text(dir + "/stats.json", "old stats\n");
  ASSERT_EQ(::chmod((dir + "/stats.json").c_str(), 0640), 0);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, out, "--stats-file", dir + "/stats.json"})));
  EXPECT_TRUE(holds_product(out));
  const std::string json = slurp(dir + "/stats.json");
  ASSERT_GT(json.size(), 100u);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n") << "the reserved space was not trimmed";
  EXPECT_EQ(json.find('\0'), std::string::npos);
  EXPECT_EQ(mode_of(dir + "/stats.json"), 0640u);
  EXPECT_TRUE(holds_only({"C.bin", "stats.json"}));
}

// ---------- names that are bytes, not text ----------

// Names are bytes on Linux: inputs, output and stats file named with bytes that are not UTF-8 (and
// a control character). --stats=json and --stats-file carry them (each such byte as the character
// of the same number, U+0080-U+00FF) and the run succeeds. The JSON writer used to throw on them
// after the commit: exit 1, no stats file, and the old output already replaced (issue 43).
TEST_F(Output, NamesThatAreNotUtf8GoIntoTheStats) {
  const std::string odd = "\xff\xe9\x01", shown = "\xc3\xbf\xc3\xa9\x01";
  const std::string odd_a = dir + "/A" + odd + ".bin", odd_out = dir + "/C" + odd + ".bin";
  const std::string stats = dir + "/S" + odd + ".json";
  write_bytes(odd_a, encode(a_records));
  write_text(odd_out, kPrevious);
  const RunResult run = run_blockmm({"-q", "--stats=json", "--stats-file", stats, odd_a, b, odd_out});
  ASSERT_TRUE(succeeded(run));
  EXPECT_TRUE(holds_product(odd_out));
  for (const std::string& text : {run.out, slurp(stats)}) {
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << text;
    EXPECT_EQ(j.at("output").get<std::string>(), dir + "/C" + shown + ".bin");
    EXPECT_EQ(j.at("inputs").at(0).at("path").get<std::string>(), dir + "/A" + shown + ".bin");
    EXPECT_EQ(j.at("inputs").at(1).at("path").get<std::string>(), b);
    EXPECT_EQ(j.at("command_line").at(4).get<std::string>(), dir + "/S" + shown + ".json");
  }
  EXPECT_TRUE(holds_only({"A" + odd + ".bin", "C" + odd + ".bin", "S" + odd + ".json"}));
}

// ---------- permissions ----------

TEST_F(Output, ExistingOutputKeepsItsPermissions) {
  for (unsigned mode : {0640u, 0604u, 0600u, 0777u}) {
    SCOPED_TRACE(mode);
    write_text(out, kPrevious);
    ASSERT_EQ(::chmod(out.c_str(), mode), 0);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, out})));
    EXPECT_TRUE(holds_product(out));
    EXPECT_EQ(mode_of(out), mode);
  }
  EXPECT_TRUE(holds_only({"C.bin"}));
}

TEST_F(Output, NewOutputTakesItsPermissionsFromTheUmask) {
  for (const auto& [mask, expected] : {std::pair<mode_t, unsigned>{027, 0640u}, {022, 0644u}, {0, 0666u}}) {
    SCOPED_TRACE(mask);
    ::unlink(out.c_str());
    const mode_t old = ::umask(mask);  // the child inherits it; this test runs no threads
    const RunResult run = run_blockmm({"-q", a, b, out});
    ::umask(old);
    ASSERT_TRUE(succeeded(run));
    EXPECT_EQ(mode_of(out), expected);
  }
}

TEST_F(Output, ReadOnlyExistingOutputIsRefused) {
  for (const std::string name : {"C.bin", "C.h5"}) {
    const std::string target = dir + "/" + name;
    write_text(target, kPrevious);
    ASSERT_EQ(::chmod(target.c_str(), 0444), 0);
    EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, target}), 4, target, "read-only"));
    EXPECT_EQ(slurp(target), kPrevious);
    EXPECT_EQ(mode_of(target), 0444u);
  }
  EXPECT_TRUE(holds_only({"C.bin", "C.h5"}));
}

// ---------- several copying threads ----------

TEST_F(Output, WriterThreadsAndChunkSizesGiveTheProduct) {
  // Large enough that a chunk is split between threads (parts of at least 256 KiB): 2.4 MB of C.
  std::mt19937_64 rng(1616);
  testing::RandomSpec spec;
  spec.n = 768;
  spec.m = 16;
  spec.density = 0.5;
  a_records = testing::random_blocks(spec, rng);
  b_records = testing::random_blocks(spec, rng);
  write_bytes(a, encode(a_records));
  write_bytes(b, encode(b_records));
  for (const char* threads : testing::sweep({"1", "2", "8"})) {
    for (const char* chunk : testing::sweep({"4K", "300K", "1M", "256M"})) {
      for (const char* backend : {"cpu", "reference"}) {
        SCOPED_TRACE(std::string(threads) + " threads, --chunk-size " + chunk + ", " + backend);
        RunOptions env;
        env.set_env = {std::string("BLOCKMM_WRITE_THREADS=") + threads};
        ::unlink(out.c_str());
        ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, "--chunk-size", chunk, a, b, out}, env)));
        EXPECT_TRUE(holds_product(out));
        EXPECT_TRUE(holds_only({"C.bin"}));
      }
    }
  }
  // The same bytes through pwrite, the writer before the map (and the one for MPI-IO's ranks).
  const std::vector<std::byte> mapped = read_bytes(out);
  RunOptions pwrite;
  pwrite.set_env = {"BLOCKMM_IO=pwrite"};
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--chunk-size", "1M", a, b, out}, pwrite)));
  EXPECT_TRUE(read_bytes(out) == mapped);
  // Over an existing, longer output: the reserved file has exactly the product's size.
  write_text(out, std::string(mapped.size() + 5000, 'x'));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, out})));
  EXPECT_TRUE(read_bytes(out) == mapped);
}

TEST_F(Output, DevNullIsWrittenInPlaceWithWriterThreads) {
  RunOptions env;
  env.set_env = {"BLOCKMM_WRITE_THREADS=8"};
  struct stat before {};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  EXPECT_TRUE(succeeded(run_blockmm({"-q", a, b, "/dev/null"}, env)));
  EXPECT_TRUE(succeeded(run_blockmm({"-q", "--format", "h5", a, b, "/dev/null"}, env)));
  struct stat after {};
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode) && after.st_rdev == before.st_rdev) << "/dev/null was replaced";
  EXPECT_TRUE(holds_only({}));
}

TEST_F(Output, BadWriterThreadCountIsAUsageError) {
  write_text(out, kPrevious);
  for (const char* bad : {"0", "65", "two"}) {
    SCOPED_TRACE(bad);
    RunOptions env;
    env.set_env = {std::string("BLOCKMM_WRITE_THREADS=") + bad};
    const RunResult run = run_blockmm({"-q", a, b, out}, env);
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    EXPECT_NE(run.err.find("BLOCKMM_WRITE_THREADS"), std::string::npos) << run.describe();
    EXPECT_EQ(slurp(out), kPrevious);
    EXPECT_TRUE(holds_only({"C.bin"}));
  }
}

// ---------- names ----------

TEST_F(Output, OutputNamesUpToNameMaxWork) {
  for (std::size_t length : {200u, 240u, 244u, 250u, 254u, 255u}) {
    SCOPED_TRACE(length);
    const std::string name(length, 'x');
    ASSERT_TRUE(succeeded(run_blockmm({"-q", a, b, dir + "/" + name})));
    EXPECT_TRUE(holds_product(dir + "/" + name));
    EXPECT_TRUE(holds_only({name}));
    ::unlink((dir + "/" + name).c_str());
  }
  // A name one byte too long is the file system's error, reported as such.
  const std::string too_long = dir + "/" + std::string(256, 'x');
  EXPECT_TRUE(failed_with(run_blockmm({"-q", a, b, too_long}), 4, too_long, "name too long"));
}

TEST_F(Output, ControlCharactersInNamesAreEscaped) {
  const std::string raw = dir + "/no\x01such\ndir\x1b[31m/C.bin";
  const std::string shown = dir + "/no\\x01such\\x0adir\\x1b[31m/C.bin";
  const RunResult run = run_blockmm({"-q", a, b, raw});
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(failed_with(run, 4, shown, "cannot create"));
  EXPECT_EQ(run.err.find('\x1b'), std::string::npos) << "a raw escape sequence reached the terminal";
  const std::string bad_input = dir + "/in\x07put.bin";
  EXPECT_TRUE(failed_with(run_blockmm({"-q", bad_input, b, out}), 3, dir + "/in\\x07put.bin", "cannot"));
  EXPECT_TRUE(holds_only({}));
}

}  // namespace
}  // namespace blockmm::e2e
