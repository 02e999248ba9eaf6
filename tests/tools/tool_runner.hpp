// Running the built tools from tests: paths from BLOCKMM_TEST_ENV, a scratch directory per
// test, and COL380 files written byte by byte (independently of src/io) for hand-made cases.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace blockmm::testing {

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// "$BLOCKMM_BUILD_DIR/<name>", "$BLOCKMM_SOURCE_DIR/<relative>".
std::string build_path(const std::string& name);
std::string source_path(const std::string& relative);

// Runs `tool` (a name in the build directory) with `args`, each quoted for the shell.
ToolRun run_tool(const std::string& tool, const std::vector<std::string>& args);

std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);
bool file_exists(const std::string& path);

// A COL380 file: header then records; `width` 2 (inputs) or 4 (products).
struct RawBlock {
  std::int32_t i = 0, j = 0;
  std::vector<std::uint32_t> values;  // m * m, row-major
};
std::string col380_bytes(std::int32_t n, std::int32_t m, const std::vector<RawBlock>& blocks, int width,
                         std::int64_t header_k = -1);

// A fresh directory for the test's files, removed afterwards.
class ToolTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

}  // namespace blockmm::testing
