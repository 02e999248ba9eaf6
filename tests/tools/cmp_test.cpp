// blockmm-cmp on hand-made files whose differences are known: exit 0 / 1 / 2, --strict, and
// the first difference it names.
#include <gtest/gtest.h>

#include "tools/tool_runner.hpp"

namespace blockmm::testing {
namespace {

using Blocks = std::vector<RawBlock>;

// n = 8, m = 2: a product (uint32) with four blocks, sorted.
Blocks product_blocks() {
  return {{0, 1, {1, 2, 3, 4}}, {1, 2, {5, 6, 7, 4294967295u}}, {1, 3, {0, 0, 9, 0}}, {3, 0, {10, 11, 12, 13}}};
}

class CmpTest : public ToolTest {
 protected:
  std::string file(const std::string& name, const Blocks& blocks, int width = 4, std::int32_t n = 8) {
    write_bytes(path(name), col380_bytes(n, 2, blocks, width));
    return path(name);
  }
  ToolRun cmp(std::vector<std::string> args) { return run_tool("blockmm-cmp", args); }
};

TEST_F(CmpTest, IdenticalFilesAreEqual) {
  const std::string e = file("e.bin", product_blocks());
  const ToolRun run = cmp({e, file("a.bin", product_blocks())});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("equal"), std::string::npos);
  EXPECT_EQ(cmp({"--strict", e, path("a.bin")}).exit_code, 0);
  const ToolRun quiet = cmp({"-q", e, path("a.bin")});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.out + quiet.err, "");
}

TEST_F(CmpTest, OrderIsFreeUnlessStrict) {
  Blocks shuffled = product_blocks();
  std::swap(shuffled[0], shuffled[3]);
  const std::string e = file("e.bin", product_blocks());
  const std::string a = file("a.bin", shuffled);
  EXPECT_EQ(cmp({e, a}).exit_code, 0);
  const ToolRun strict = cmp({"--strict", e, a});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.out.find("not sorted"), std::string::npos) << strict.out;
  EXPECT_NE(strict.out.find("record 1 "), std::string::npos) << strict.out;  // (1, 2) after (3, 0)
  // EXPECTED's order never matters, strict or not.
  EXPECT_EQ(cmp({"--strict", a, e}).exit_code, 0);
}

TEST_F(CmpTest, OneChangedValueIsNamed) {
  Blocks changed = product_blocks();
  changed[1].values[2] = 8;  // block (1, 2), element (1, 0): 7 -> 8
  const ToolRun run = cmp({file("e.bin", product_blocks()), file("a.bin", changed)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("block (1, 2) element (1, 0): expected 7, actual 8"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 block(s) with different values (1 value(s)), 0 missing, 0 extra"), std::string::npos)
      << run.out;
  const ToolRun quiet = cmp({"-q", path("e.bin"), path("a.bin")});
  EXPECT_EQ(quiet.exit_code, 1);
  EXPECT_EQ(quiet.out, "");
}

TEST_F(CmpTest, SaturatedValuesCompareExactly) {
  Blocks changed = product_blocks();
  changed[1].values[3] = 4294967294u;  // one below saturation
  const ToolRun run = cmp({file("e.bin", product_blocks()), file("a.bin", changed)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("expected 4294967295, actual 4294967294"), std::string::npos) << run.out;
}

TEST_F(CmpTest, MissingAndExtraBlocksAreCounted) {
  Blocks fewer = product_blocks();
  fewer.erase(fewer.begin());  // (0, 1) missing
  fewer.push_back({2, 2, {0, 0, 0, 1}});  // (2, 2) extra
  fewer[0].values[0] = 50;  // (1, 2) changed too
  fewer[0].values[1] = 60;
  const ToolRun run = cmp({file("e.bin", product_blocks()), file("a.bin", fewer)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("first at block (0, 1) of EXPECTED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("missing from ACTUAL"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 block(s) with different values (2 value(s)), 1 missing, 1 extra"), std::string::npos)
      << run.out;
  const ToolRun reverse = cmp({path("a.bin"), path("e.bin")});
  EXPECT_EQ(reverse.exit_code, 1);
  EXPECT_NE(reverse.out.find("block (0, 1) of ACTUAL"), std::string::npos) << reverse.out;
}

TEST_F(CmpTest, AllZeroBlocksCountAsAbsent) {
  Blocks with_zero = product_blocks();
  with_zero.insert(with_zero.begin() + 3, {2, 0, {0, 0, 0, 0}});  // in (i, j) order
  const std::string e = file("e.bin", product_blocks());
  const std::string a = file("a.bin", with_zero);
  EXPECT_EQ(cmp({e, a}).exit_code, 0);
  EXPECT_EQ(cmp({a, e}).exit_code, 0);
  const ToolRun strict = cmp({"--strict", e, a});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.out.find("all values zero"), std::string::npos) << strict.out;
  // An all-zero block where EXPECTED has values is a missing block.
  Blocks zeroed = product_blocks();
  zeroed[3].values = {0, 0, 0, 0};
  const ToolRun run = cmp({e, file("z.bin", zeroed)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("block (3, 0) of EXPECTED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 missing"), std::string::npos) << run.out;
}

TEST_F(CmpTest, DuplicatesAreADifferenceInActualAndMalformedInExpected) {
  Blocks doubled = product_blocks();
  doubled.push_back(doubled[1]);  // an identical second copy
  const std::string e = file("e.bin", product_blocks());
  const std::string d = file("d.bin", doubled);
  const ToolRun run = cmp({e, d});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("block (1, 2) occurs twice in ACTUAL"), std::string::npos) << run.out;
  const ToolRun bad = cmp({d, e});
  EXPECT_EQ(bad.exit_code, 3);  // EXPECTED is malformed: bad input
  EXPECT_NE(bad.err.find("blockmm-cmp: error: " + d + ": block (1, 2) occurs twice"), std::string::npos) << bad.err;
}

TEST_F(CmpTest, ShapeDifferencesAreDifferences) {
  const ToolRun run = cmp({file("e.bin", product_blocks()), file("a.bin", product_blocks(), 4, 10)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("EXPECTED has n = 8, m = 2; ACTUAL has n = 10, m = 2"), std::string::npos) << run.out;
}

TEST_F(CmpTest, InputsCompareToo) {
  Blocks input = product_blocks();
  input[1].values[3] = 65535;
  const std::string e = file("e.bin", input, 2);
  EXPECT_EQ(cmp({e, file("a.bin", input, 2)}).exit_code, 0);
  input[3].values[0] = 11;
  const ToolRun run = cmp({e, file("b.bin", input, 2)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("block (3, 0) element (0, 0): expected 10, actual 11"), std::string::npos) << run.out;
  // An input against a product: nothing to compare, a usage error (each file is well formed).
  const ToolRun mixed = cmp({e, file("p.bin", product_blocks(), 4)});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("uint16"), std::string::npos) << mixed.err;
}

TEST_F(CmpTest, EmptyFilesFitEitherWidth) {
  const std::string empty = file("empty.bin", {});
  const std::string empty2 = file("empty2.bin", {});
  EXPECT_EQ(cmp({empty, empty2}).exit_code, 0);
  EXPECT_EQ(cmp({"--strict", empty, empty2}).exit_code, 0);
  EXPECT_EQ(cmp({empty, file("p.bin", product_blocks())}).exit_code, 1);
  EXPECT_EQ(cmp({file("i.bin", product_blocks(), 2), empty}).exit_code, 1);
  // Only all-zero blocks: the same matrix as an empty one.
  EXPECT_EQ(cmp({empty, file("z.bin", {{1, 1, {0, 0, 0, 0}}})}).exit_code, 0);
}

// Exit 3, as every tool for bad input; 1 stays "different", 2 usage.
TEST_F(CmpTest, MalformedOrUnreadableFilesExitThree) {
  const std::string good = file("good.bin", product_blocks());
  std::string bytes = read_bytes(good);
  write_bytes(path("truncated.bin"), bytes.substr(0, bytes.size() - 3));
  write_bytes(path("trailing.bin"), bytes + "xy");
  write_bytes(path("short.bin"), "abc");
  Blocks outside = product_blocks();
  outside[2].j = 4;  // p = 4
  file("outside.bin", outside);
  write_bytes(path("bad_header.bin"), col380_bytes(9, 2, {}, 4));  // m does not divide n
  for (const std::string name : {"truncated.bin", "trailing.bin", "short.bin", "outside.bin", "bad_header.bin", "absent.bin"}) {
    for (bool first : {true, false}) {
      const ToolRun run = first ? cmp({path(name), good}) : cmp({good, path(name)});
      EXPECT_EQ(run.exit_code, 3) << name << ": " << run.out << run.err;
      EXPECT_EQ(run.err.rfind("blockmm-cmp: error: " + path(name) + ": ", 0), 0u) << run.err;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
      EXPECT_EQ(run.out, "");
    }
  }
}

TEST_F(CmpTest, UsageErrorsExitTwo) {
  EXPECT_EQ(cmp({}).exit_code, 2);
  EXPECT_EQ(cmp({path("x")}).exit_code, 2);
  EXPECT_EQ(cmp({"--bogus", path("x"), path("y")}).exit_code, 2);
  EXPECT_EQ(cmp({"--help"}).exit_code, 0);
}

TEST_F(CmpTest, FindsOneChangedValueInAGeneratedMatrix) {
  // Unsorted, larger files: the indexed path. Patch one value of ACTUAL and expect exactly it.
  for (const std::string order : {"sorted", "shuffled"}) {
    ASSERT_EQ(run_tool("blockmm-gen", {path("e.bin"), "--n", "2048", "--m", "4", "--k", "60000", "--max-value", "65535", "--order", order, "-q"})
                  .exit_code,
              0);
    ASSERT_EQ(run_tool("blockmm-gen", {path("s.bin"), "--n", "2048", "--m", "4", "--k", "60000", "--max-value", "65535", "--order", "reverse", "-q"})
                  .exit_code,
              0);
    std::string bytes = read_bytes(path("s.bin"));
    const std::size_t record = 31337, stride = 8 + 2 * 16;
    const std::size_t at = 12 + record * stride;
    auto word = [&](std::size_t offset) {
      return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset])) |
             static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + 1])) << 8 |
             static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + 2])) << 16 |
             static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + 3])) << 24;
    };
    const std::uint32_t i = word(at), j = word(at + 4);
    const std::size_t value_at = at + 8 + 2 * 6;  // element (1, 2)
    const unsigned old_value = static_cast<unsigned char>(bytes[value_at]) | static_cast<unsigned char>(bytes[value_at + 1]) << 8;
    const unsigned new_value = old_value ^ 1;
    bytes[value_at] = static_cast<char>(new_value & 0xFF);
    write_bytes(path("s.bin"), bytes);
    const ToolRun run = cmp({path("e.bin"), path("s.bin")});
    EXPECT_EQ(run.exit_code, 1) << order;
    const std::string expected = "block (" + std::to_string(i) + ", " + std::to_string(j) + ") element (1, 2): expected " +
                                 std::to_string(old_value) + ", actual " + std::to_string(new_value);
    EXPECT_NE(run.out.find(expected), std::string::npos) << run.out << "\nwanted: " << expected;
    EXPECT_NE(run.out.find("1 block(s) with different values (1 value(s)), 0 missing, 0 extra"), std::string::npos);
  }
}

// HDF5 (BSR) files, told apart by signature, compare as the matrices they hold, in any mix
// with binary files; a difference in the HDF5 file names its block of /data.
class CmpHdf5Test : public CmpTest {};

TEST_F(CmpHdf5Test, BinaryAndHdf5CompareAsMatrices) {
  const std::string e = file("e.bin", product_blocks());
  ASSERT_EQ(run_tool("blockmm-convert", {e, path("e.h5")}).exit_code, 0);
  for (const auto& [x, y] : {std::pair{e, path("e.h5")}, std::pair{path("e.h5"), e}, std::pair{path("e.h5"), path("e.h5")}}) {
    const ToolRun run = cmp({"--strict", x, y});
    EXPECT_EQ(run.exit_code, 0) << x << " " << y << "\n" << run.out << run.err;
  }
  Blocks changed = product_blocks();
  changed[1].values[2] = 8;  // block (1, 2), element (1, 0): 7 -> 8
  ASSERT_EQ(run_tool("blockmm-convert", {file("a.bin", changed), path("a.h5")}).exit_code, 0);
  const ToolRun run = cmp({e, path("a.h5")});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("block (1, 2) element (1, 0): expected 7, actual 8"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ACTUAL block 1 of /data"), std::string::npos) << run.out;
  // An input (uint16) against a product: trouble.
  Blocks input = product_blocks();
  input[1].values[3] = 4;
  ASSERT_EQ(run_tool("blockmm-convert", {file("i.bin", input, 2), path("i.h5")}).exit_code, 0);
  EXPECT_EQ(cmp({path("i.h5"), e}).exit_code, 2);
  // A Matrix Market file is named as one.
  write_bytes(path("m.mtx"), "%%MatrixMarket matrix coordinate integer general\n8 8 1\n1 1 5\n");
  const ToolRun mtx = cmp({e, path("m.mtx")});
  EXPECT_EQ(mtx.exit_code, 3);
  EXPECT_NE(mtx.err.find(path("m.mtx") + ": a Matrix Market file; convert it first with blockmm-import"),
            std::string::npos)
      << mtx.err;
}

TEST_F(CmpHdf5Test, EveryToolAnswersTheProjectVersion) {
  const ToolRun blockmm = run_tool("blockmm", {"--version"});
  ASSERT_EQ(blockmm.exit_code, 0);
  // The first line is "blockmm X.Y.Z (commit ...)"; the lines after it name the build's features.
  const std::string first_line = blockmm.out.substr(0, blockmm.out.find('\n'));
  ASSERT_EQ(first_line.rfind("blockmm ", 0), 0u) << blockmm.out;
  const std::string version = first_line.substr(8, first_line.find(' ', 8) - 8) + "\n";
  EXPECT_FALSE(version.empty());
  for (const char* tool : {"blockmm-gen", "blockmm-cmp", "blockmm-info", "blockmm-convert"}) {
    const ToolRun run = run_tool(tool, {"--version"});
    EXPECT_EQ(run.exit_code, 0) << tool;
    EXPECT_EQ(run.out, std::string(tool) + " " + version) << tool;
  }
}

}  // namespace
}  // namespace blockmm::testing
