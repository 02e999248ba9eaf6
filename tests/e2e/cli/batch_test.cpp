// Several products in one run (--batch FILE, --product): each product's output is the bytes a run
// of its own writes; a product that fails leaves the others' outputs and its own old output as
// they were, and the run's exit code is the first failure's; a malformed line stops the batch
// before anything is written; a line's options override the run's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

class Batch : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-batch"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");

  std::string put(const std::string& name, const InputRecords& records) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, encode(records));
    return path;
  }
  // The product a run of its own writes.
  std::vector<std::byte> alone(const std::vector<std::string>& args, const std::string& out) const {
    std::vector<std::string> all{"-q"};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back(out);
    const RunResult run = run_blockmm(all);
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    return read_bytes(out);
  }
};

TEST_F(Batch, EveryProductIsTheBytesOfARunOfItsOwn) {
  std::mt19937_64 rng(4242);
  std::vector<std::string> inputs;
  for (int c = 0; c < 4; ++c) {
    const testing::RandomSpec spec = testing::random_spec(rng, 20);
    inputs.push_back(put("a" + std::to_string(c) + ".bin", testing::random_blocks(spec, rng)));
    inputs.push_back(put("b" + std::to_string(c) + ".bin", testing::random_blocks(spec, rng)));
  }
  // Each line: its options, then A B and an output; backends, formats and chunk sizes mixed, a
  // quoted name with a blank, comments and blank lines between.
  const std::vector<std::vector<std::string>> products{{"--backend", "cpu", inputs[0], inputs[1]},
                                                       {"--backend", "reference", inputs[2], inputs[3]},
                                                       {"--chunk-size", "1K", inputs[4], inputs[5]},
                                                       {inputs[6], inputs[7]},
                                                       {inputs[0], inputs[1]}};
  const std::vector<std::string> outputs{"C0.bin", "C1.bin", "C2.h5", "C 3.bin", "C4.bin"};
  std::string text = "# products of a test\n\n";
  for (std::size_t p = 0; p < products.size(); ++p) {
    for (const std::string& w : products[p]) text += w + " ";
    text += "'" + out_dir + "/" + outputs[p] + "'\n";
    if (p == 1) text += "   # a comment after blanks\n";
  }
  const std::string batch = in_dir + "/batch.txt";
  write_text(batch, text);
  const RunResult run = run_blockmm({"-q", "--threads", "1", "--batch", batch});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  for (std::size_t p = 0; p < products.size(); ++p) {
    SCOPED_TRACE(outputs[p]);
    const std::vector<std::byte> batched = read_bytes(out_dir + "/" + outputs[p]);
    EXPECT_TRUE(batched == alone(products[p], in_dir + "/alone." + (outputs[p] == "C2.h5" ? "h5" : "bin")));
  }
  // The same products as --product, one a word.
  const std::string first = "--product=" + inputs[0] + " " + inputs[1] + " " + out_dir + "/P0.bin";
  const RunResult inline_run =
      run_blockmm({"-q", first, "--product", "--backend reference " + inputs[2] + " " + inputs[3] + " " + out_dir + "/P1.bin"});
  ASSERT_EQ(inline_run.exit_code, 0) << inline_run.describe();
  EXPECT_TRUE(read_bytes(out_dir + "/P0.bin") == read_bytes(out_dir + "/C0.bin"));
  EXPECT_TRUE(read_bytes(out_dir + "/P1.bin") == read_bytes(out_dir + "/C1.bin"));
}

TEST_F(Batch, AFailedProductLeavesTheOthersAndItsOldOutput) {
  const std::string a = put("a.bin", testing::make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}}));
  const std::string b = put("b.bin", testing::make_records(16, 4, {{1, 2, std::vector<std::uint16_t>(16, 5)}}));
  const std::string old = out_dir + "/C2.bin";
  write_text(old, "an old output");
  write_text(in_dir + "/batch.txt", a + " " + b + " " + out_dir + "/C1.bin\n" + a + " " + in_dir + "/missing.bin " + old +
                                        "\n" + b + " " + a + " " + out_dir + "/C3.bin\n");
  const RunResult run = run_blockmm({"--batch", in_dir + "/batch.txt"});
  EXPECT_EQ(run.exit_code, 3) << run.describe();
  EXPECT_NE(run.err.find("batch.txt:2: " + in_dir + "/missing.bin"), std::string::npos) << run.describe();
  EXPECT_NE(run.err.find("2 of 3 products written"), std::string::npos) << run.describe();
  EXPECT_TRUE(read_bytes(out_dir + "/C1.bin") == alone({a, b}, in_dir + "/alone1.bin"));
  EXPECT_TRUE(read_bytes(out_dir + "/C3.bin") == alone({b, a}, in_dir + "/alone3.bin"));
  std::vector<std::byte> kept = read_bytes(old);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(kept.data()), kept.size()), "an old output");
  EXPECT_EQ(list_dir(out_dir), (std::vector<std::string>{"C1.bin", "C2.bin", "C3.bin"}));
}

TEST_F(Batch, AMalformedLineStopsTheBatchBeforeAnythingIsWritten) {
  const std::string a = put("a.bin", testing::make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}}));
  const std::vector<std::pair<std::string, std::string>> bad{
      {a + " " + a + " " + out_dir + "/C1.bin\n" + a + " " + a + "\n", "batch.txt:2: three files are needed"},
      {a + " " + a + " " + out_dir + "/C1.bin --threads two\n", "batch.txt:1: --threads 'two'"},
      {a + " '" + a + " " + out_dir + "/C1.bin\n", "batch.txt:1: a quote (') is not closed"},
      {"# nothing but a comment\n\n", "no product in it"},
      {a + " " + a + " " + out_dir + "/C1.bin --batch other.txt\n", "not as A B OUT"},
      {"--batch other.txt\n", "a batch's product cannot hold a batch"}};
  for (const auto& [text, message] : bad) {
    SCOPED_TRACE(message);
    write_text(in_dir + "/batch.txt", text);
    const RunResult run = run_blockmm({"--batch", in_dir + "/batch.txt"});
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    EXPECT_EQ(split_lines(run.err).size(), 1u) << run.describe();
    EXPECT_NE(run.err.find(message), std::string::npos) << run.describe();
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
  const RunResult both = run_blockmm({"--batch", in_dir + "/batch.txt", a, a, out_dir + "/C.bin"});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  const RunResult one_stats_file = run_blockmm({"--batch", in_dir + "/batch.txt", "--stats-file", out_dir + "/S.json"});
  EXPECT_EQ(one_stats_file.exit_code, 2) << one_stats_file.describe();
  EXPECT_TRUE(list_dir(out_dir).empty());
  const RunResult missing = run_blockmm({"--batch", in_dir + "/none.txt"});
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_NE(missing.err.find("none.txt: cannot read it"), std::string::npos) << missing.describe();
}

// A product whose output or --stats-file is the batch file itself (by its name, a link, or as the
// file standard input reads) overwrote the batch (issue 52, item 3). Exit 2 naming the line,
// before any product runs: the batch and the other products' outputs as they were.
TEST_F(Batch, NoProductWritesOverTheBatch) {
  const std::string a = put("a.bin", testing::make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}}));
  const std::string batch = in_dir + "/batch.txt", link = in_dir + "/batch.link";
  ASSERT_EQ(::symlink("batch.txt", link.c_str()), 0);
  const std::string first = a + " " + a + " " + out_dir + "/C1.bin\n";
  for (const std::string& line : {a + " " + a + " " + batch, a + " " + a + " " + link,
                                   a + " " + a + " " + out_dir + "/C2.bin --stats-file " + batch}) {
    SCOPED_TRACE(line);
    const std::string text = first + line + "\n";
    write_text(batch, text);
    for (const bool from_stdin : {false, true}) {
      const RunResult run =
          from_stdin ? run_process({"sh", "-c", "exec \"$0\" --batch - < \"$1\"", blockmm_bin(), batch})
                     : run_blockmm({"--batch", batch});
      EXPECT_EQ(run.exit_code, 2) << run.describe();
      EXPECT_EQ(split_lines(run.err).size(), 1u) << run.describe();
      EXPECT_NE(run.err.find(":2: the "), std::string::npos) << run.describe();
      EXPECT_NE(run.err.find("is the batch file"), std::string::npos) << run.describe();
      const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
      EXPECT_EQ(read_bytes(batch), std::vector<std::byte>(bytes, bytes + text.size())) << "the batch changed";
      EXPECT_TRUE(list_dir(out_dir).empty());
    }
  }
}

}  // namespace
}  // namespace blockmm::e2e
