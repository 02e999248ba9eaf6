#include "tools/tool_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace blockmm::testing {
namespace {

std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << name << " is not set: run the tests through ctest";
    return "";
  }
  return v;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string build_path(const std::string& name) { return env_or_fail("BLOCKMM_BUILD_DIR") + "/" + name; }
std::string source_path(const std::string& relative) { return env_or_fail("BLOCKMM_SOURCE_DIR") + "/" + relative; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

ToolRun run_tool(const std::string& tool, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string base = std::filesystem::temp_directory_path().string() + "/blockmm-tools-run-" +
                           std::to_string(::getpid()) + "-" + std::to_string(counter++);
  std::string command = quote(build_path(tool));
  for (const auto& a : args) command += " " + quote(a);
  command += " >" + quote(base + ".out") + " 2>" + quote(base + ".err");
  const int status = std::system(command.c_str());
  ToolRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  run.out = read_bytes(base + ".out");
  run.err = read_bytes(base + ".err");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return run;
}

std::string col380_bytes(std::int32_t n, std::int32_t m, const std::vector<RawBlock>& blocks, int width,
                         std::int64_t header_k) {
  std::string bytes;
  auto put = [&](std::uint64_t v, int size) {
    for (int b = 0; b < size; ++b) bytes += static_cast<char>((v >> (8 * b)) & 0xFF);
  };
  put(static_cast<std::uint32_t>(n), 4);
  put(static_cast<std::uint32_t>(m), 4);
  put(static_cast<std::uint32_t>(header_k >= 0 ? header_k : static_cast<std::int64_t>(blocks.size())), 4);
  for (const RawBlock& b : blocks) {
    put(static_cast<std::uint32_t>(b.i), 4);
    put(static_cast<std::uint32_t>(b.j), 4);
    EXPECT_EQ(b.values.size(), static_cast<std::size_t>(m) * m);
    for (std::uint32_t v : b.values) put(v, width);
  }
  return bytes;
}

void ToolTest::SetUp() {
  std::string pattern = std::filesystem::temp_directory_path().string() + "/blockmm-tools-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
  dir_ = pattern;
}

void ToolTest::TearDown() {
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

}  // namespace blockmm::testing
