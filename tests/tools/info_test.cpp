// blockmm-info on a hand-made file whose every fact is known, in text and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/tool_runner.hpp"

namespace blockmm::testing {
namespace {

class InfoTest : public ToolTest {};

TEST_F(InfoTest, ReportsTheFactsOfAKnownFile) {
  // n = 12, m = 2 (p = 6): rows 0:2, 1:0, 2:1, 4:3 records; (4, 5) twice; one all-zero block;
  // out of order at record 2; values 0..70000 (a product).
  const std::vector<RawBlock> blocks = {
      {0, 0, {1, 2, 3, 4}},     {0, 3, {0, 0, 0, 0}},     {2, 1, {7, 0, 0, 0}},
      {4, 5, {5, 70000, 6, 7}}, {4, 5, {9, 9, 9, 9}},     {4, 0, {3, 3, 3, 3}},
  };
  const std::string bytes = col380_bytes(12, 2, blocks, 4);
  write_bytes(path("c.bin"), bytes);

  const ToolRun json_run = run_tool("blockmm-info", {"--json", path("c.bin")});
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const nlohmann::json j = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(j["path"], path("c.bin"));
  EXPECT_EQ(j["file_bytes"], bytes.size());
  EXPECT_EQ(j["n"], 12);
  EXPECT_EQ(j["m"], 2);
  EXPECT_EQ(j["k"], 6);
  EXPECT_EQ(j["block_rows"], 6);
  EXPECT_EQ(j["value_type"], "uint32");
  EXPECT_EQ(j["value_bytes"], 4);
  EXPECT_EQ(j["record_bytes"], 24);
  EXPECT_EQ(j["sorted"], false);
  EXPECT_EQ(j["first_unsorted_record"], 5);  // (4, 0) after (4, 5)
  EXPECT_EQ(j["duplicates"], 1);
  EXPECT_EQ(j["zero_blocks"], 1);
  EXPECT_EQ(j["min_value"], 0);
  EXPECT_EQ(j["max_value"], 70000);
  EXPECT_EQ(j["blocks_per_row"]["min"], 0);
  EXPECT_EQ(j["blocks_per_row"]["max"], 3);
  EXPECT_DOUBLE_EQ(j["blocks_per_row"]["mean"].get<double>(), 1.0);
  EXPECT_EQ(j["blocks_per_row"]["empty_rows"], 3);

  const ToolRun text = run_tool("blockmm-info", {path("c.bin")});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const std::string line : {"n = 12, m = 2, k = 6", "product (uint32 values)", "sorted:          no (record 5",
                                 "duplicates:      1", "all-zero blocks: 1", "value range:     0 .. 70000",
                                 "min 0, mean 1, max 3 (3 empty rows)"})
    EXPECT_NE(text.out.find(line), std::string::npos) << "missing '" << line << "' in\n" << text.out;
}

TEST_F(InfoTest, SortedInputFile) {
  write_bytes(path("a.bin"), col380_bytes(4, 2, {{0, 1, {1, 2, 3, 65535}}, {1, 0, {0, 0, 0, 9}}}, 2));
  const ToolRun run = run_tool("blockmm-info", {"--json", path("a.bin")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["value_type"], "uint16");
  EXPECT_EQ(j["sorted"], true);
  EXPECT_TRUE(j["first_unsorted_record"].is_null());
  EXPECT_EQ(j["duplicates"], 0);
  EXPECT_EQ(j["zero_blocks"], 0);
  EXPECT_EQ(j["max_value"], 65535);
  EXPECT_EQ(j["min_value"], 0);
}

TEST_F(InfoTest, EmptyFile) {
  write_bytes(path("e.bin"), col380_bytes(8, 4, {}, 2));
  const ToolRun run = run_tool("blockmm-info", {"--json", path("e.bin")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["k"], 0);
  EXPECT_TRUE(j["min_value"].is_null());
  EXPECT_TRUE(j["value_bytes"].is_null());
  EXPECT_EQ(j["blocks_per_row"]["empty_rows"], 2);
}

TEST_F(InfoTest, BadFilesExitThree) {
  const std::string good = col380_bytes(4, 2, {{0, 1, {1, 2, 3, 4}}}, 2);
  write_bytes(path("truncated.bin"), good.substr(0, good.size() - 1));
  write_bytes(path("outside.bin"), col380_bytes(4, 2, {{0, 2, {1, 2, 3, 4}}}, 2));
  write_bytes(path("k_too_big.bin"), col380_bytes(4, 2, {}, 2, 5));
  for (const std::string name : {"truncated.bin", "outside.bin", "k_too_big.bin", "absent.bin"}) {
    const ToolRun run = run_tool("blockmm-info", {path(name)});
    EXPECT_EQ(run.exit_code, 3) << name;
    EXPECT_EQ(run.err.rfind("blockmm-info: error: " + path(name) + ": ", 0), 0u) << run.err;
    EXPECT_EQ(run.out, "");
  }
  EXPECT_EQ(run_tool("blockmm-info", {}).exit_code, 2);
}

// An HDF5 copy (made by blockmm-convert) reports the same facts, and says it is HDF5.
TEST_F(InfoTest, ReadsHdf5AsTheSameMatrix) {
  const std::vector<RawBlock> blocks = {{0, 1, {1, 2, 3, 4}}, {2, 0, {0, 65535, 0, 0}}, {2, 2, {9, 9, 9, 9}}};
  write_bytes(path("a.bin"), col380_bytes(6, 2, blocks, 2));
  ASSERT_EQ(run_tool("blockmm-convert", {path("a.bin"), path("a.h5")}).exit_code, 0);
  const ToolRun bin = run_tool("blockmm-info", {"--json", path("a.bin")});
  const ToolRun h5 = run_tool("blockmm-info", {"--json", path("a.h5")});
  ASSERT_EQ(bin.exit_code, 0) << bin.err;
  ASSERT_EQ(h5.exit_code, 0) << h5.err;
  const nlohmann::json b = nlohmann::json::parse(bin.out), h = nlohmann::json::parse(h5.out);
  EXPECT_EQ(b["format"], "binary");
  EXPECT_EQ(h["format"], "hdf5");
  EXPECT_EQ(h["file_bytes"], read_bytes(path("a.h5")).size());
  for (const char* key : {"n", "m", "k", "value_type", "min_value", "max_value", "sorted", "duplicates", "zero_blocks",
                          "blocks_per_row"})
    EXPECT_EQ(h[key], b[key]) << key;
  EXPECT_EQ(h["k"], 3);
  EXPECT_EQ(h["max_value"], 65535);
  const ToolRun text = run_tool("blockmm-info", {path("a.h5")});
  EXPECT_NE(text.out.find("format:          HDF5 (BSR layout"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace blockmm::testing
