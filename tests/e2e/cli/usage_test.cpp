// The blockmm executable's usage end to end: usage errors (exit 2, one short line, nothing
// written), bad option and environment values naming what they take, --format's names, --help and
// --version.
#include <gtest/gtest.h>

#include <cstring>

#include "e2e/cli/cli_fixture.hpp"

namespace blockmm::e2e {
namespace {

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

// Values of any length: a 100 000-character BLOCKMM_SHARE_B gave a 100 049-byte error line, a
// 5 000-digit --chunk-size in a batch line printed the value twice (issue 52, item 5). Every
// quoted value is cut after 160 bytes with "…" (a UTF-8 character never split, control characters
// still escaped): one line of a few hundred bytes, whatever was given, from blockmm (options,
// CLI11's messages, settings, batch lines) and the C++ tools (OMP_NUM_THREADS, which libgomp
// complains of too: tests/core).
TEST_F(Cli, LongValuesAreCutInMessages) {
  const std::string digits(5000, '9'), letters(100000, 'x');
  std::string utf8;
  for (int c = 0; c < 3000; ++c) utf8 += "\xc3\xa9";  // é, two bytes
  const std::string batch = in_dir + "/batch.txt";
  write_text(batch, a + " " + b + " " + out + " --chunk-size " + digits + "\n");
  struct Case {
    std::string tool;
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"blockmm", {a, b, out}, {"BLOCKMM_SHARE_B=" + letters}, "BLOCKMM_SHARE_B='xxx"},
      {"blockmm", {a, b, out}, {"BLOCKMM_WRITE_THREADS=" + utf8 + "\n"}, "BLOCKMM_WRITE_THREADS='\xc3\xa9"},
      {"blockmm", {"--batch", batch}, {}, "batch.txt:1: --chunk-size '999"},
      {"blockmm", {"--chunk-size", digits, a, b, out}, {}, "--chunk-size '999"},
      {"blockmm", {"--mem-budget", letters, a, b, out}, {}, "--mem-budget 'xxx"},
      {"blockmm", {"--threads", digits, a, b, out}, {}, "--threads 999"},
      {"blockmm", {"--threads", letters, a, b, out}, {}, "--threads 'xxx"},
      {"blockmm", {"--gpus", letters, a, b, out}, {}, "--gpus 'xxx"},
      {"blockmm", {"--parts", letters, a, b, out}, {}, "--parts 'xxx"},
      {"blockmm", {"--backend", letters, a, b, out}, {}, "--backend"},
      {"blockmm", {"--" + letters, a, b, out}, {}, "unknown option '--xxx"},
      {"blockmm", {a, b, out, letters}, {}, "xxx"},
      {"blockmm-convert", {"--to", letters, a, out}, {}, "--to"},
      {"blockmm-gen", {out, "--n", digits, "--m", "4", "--k", "1"}, {}, "--n"},
      {"blockmm-gen", {out, "--n", "16", "--m", "4", "--k", "1", "--threads", letters}, {}, "--threads 'xxx"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    RunOptions options;
    options.set_env = c.env;
    const std::string bin = blockmm_bin();
    std::vector<std::string> argv{bin.substr(0, bin.rfind('/') + 1) + c.tool};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const RunResult run = run_process(argv, options);
    EXPECT_EQ(run.exit_code, 2) << run.describe().substr(0, 2000);
    const std::vector<std::string> lines = split_lines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.describe().substr(0, 2000);
    EXPECT_LT(lines[0].size(), 600u) << lines[0].substr(0, 2000);
    EXPECT_NE(lines[0].find(c.says), std::string::npos) << lines[0].substr(0, 2000);
    EXPECT_NE(lines[0].find("\xE2\x80\xA6"), std::string::npos) << "no \"…\" where the value was cut\n" << lines[0];
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
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

}  // namespace
}  // namespace blockmm::e2e
