// inputs/: the example pairs regenerate byte for byte from the commands in inputs/README.md,
// blockmm's product of each equals the committed expected file byte for byte, and that file is
// itself the brute-force dense product (tests/support) of the inputs.
#include <gtest/gtest.h>

#include <cstring>

#include "io/binary_format.hpp"
#include "support/dense_reference.hpp"
#include "tools/tool_runner.hpp"

namespace blockmm::testing {
namespace {

struct Example {
  std::string a, b, c;
  std::vector<std::string> gen_a, gen_b;  // blockmm-gen options, as in inputs/README.md
};

std::vector<Example> examples() {
  return {
      {"A.bin", "B.bin", "expected_C.bin",
       {"--n", "256", "--m", "4", "--density", "0.1", "--max-value", "1023", "--seed", "11"},
       {"--n", "256", "--m", "4", "--density", "0.1", "--max-value", "1023", "--seed", "12"}},
      {"saturating_A.bin", "saturating_B.bin", "saturating_expected_C.bin",
       {"--n", "8", "--m", "2", "--density", "0.5", "--max-value", "65535", "--seed", "21"},
       {"--n", "8", "--m", "2", "--density", "0.5", "--max-value", "65535", "--seed", "31"}},
  };
}

class ExamplesTest : public ToolTest {};

TEST_F(ExamplesTest, InputsRegenerateFromTheReadmeCommands) {
  for (const Example& x : examples()) {
    for (const auto& [name, options] : {std::pair{x.a, x.gen_a}, std::pair{x.b, x.gen_b}}) {
      std::vector<std::string> args = options;
      args.insert(args.begin(), path(name));
      args.push_back("-q");
      ASSERT_EQ(run_tool("blockmm-gen", args).exit_code, 0);
      EXPECT_TRUE(read_bytes(path(name)) == read_bytes(source_path("inputs/" + name))) << name;
    }
  }
}

TEST_F(ExamplesTest, BlockmmReproducesTheExpectedProducts) {
  for (const Example& x : examples()) {
    const std::string expected = read_bytes(source_path("inputs/" + x.c));
    ASSERT_GT(expected.size(), 12u) << x.c;
    for (const std::string backend : {"auto", "reference", "cpu"}) {
      const std::string out = path(backend + "_" + x.c);
      const ToolRun run = run_tool("blockmm", {"-q", "--backend", backend, source_path("inputs/" + x.a),
                                               source_path("inputs/" + x.b), out});
      ASSERT_EQ(run.exit_code, 0) << backend << ": " << run.err;
      EXPECT_TRUE(read_bytes(out) == expected) << x.c << " with --backend " << backend;
      EXPECT_EQ(run_tool("blockmm-cmp", {"--strict", source_path("inputs/" + x.c), out}).exit_code, 0);
    }
  }
}

TEST(Examples, ExpectedProductsAreTheDenseProduct) {
  for (const Example& x : examples()) {
    const InputRecords a = io::read_input_file(source_path("inputs/" + x.a));
    const InputRecords b = io::read_input_file(source_path("inputs/" + x.b));
    const OutputRecords oracle = dense_product(a, b);
    const OutputRecords expected = io::read_output_file(source_path("inputs/" + x.c));
    EXPECT_EQ(expected.shape, a.shape);
    EXPECT_TRUE(expected.bytes == oracle.bytes) << x.c << ": " << compare_outputs(oracle, expected);
  }
  // The saturating example does saturate, and not everywhere.
  const OutputRecords sat = io::read_output_file(source_path("inputs/saturating_expected_C.bin"));
  std::int64_t saturated = 0, total = 0;
  for (std::int64_t q = 0; q < sat.size(); ++q)
    for (std::int64_t e = 0; e < sat.shape.block_values(); ++e, ++total) saturated += sat.values(q)[e] == 0xFFFFFFFFu;
  EXPECT_GT(saturated, 0);
  EXPECT_LT(saturated, total);
}

}  // namespace
}  // namespace blockmm::testing
