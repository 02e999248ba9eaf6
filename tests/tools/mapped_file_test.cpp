// tools/mapped_file: a COL380 file that shrinks under blockmm-info or blockmm-cmp. When it had
// been mapped, the next access past the new end raised SIGBUS and killed the tool without a
// message; read into memory, a file that shrinks before it is read is an InputError (exit 3 /
// 2 in the tools), and one that shrinks afterwards cannot reach the copy. Each case runs in a
// forked child, so that a crash is reported as a failure instead of ending the test program.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "core/error.hpp"
#include "io/binary_format.hpp"
#include "tools/compare.hpp"
#include "tools/file_summary.hpp"
#include "tools/mapped_file.hpp"
#include "tools/tool_runner.hpp"

namespace blockmm::testing {
namespace {

class MappedFileTest : public ToolTest {
 protected:
  // 4096 random blocks, m = 4, uint16: 139 KB, many pages past any point it is cut at.
  std::string write_input(const std::string& name, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<RawBlock> blocks;
    for (std::int32_t i = 0; i < 64; ++i)
      for (std::int32_t j = 0; j < 64; ++j) {
        RawBlock b{i, j, std::vector<std::uint32_t>(16)};
        for (auto& v : b.values) v = static_cast<std::uint32_t>(rng() % 65536);
        blocks.push_back(b);
      }
    const std::string file = path(name);
    write_bytes(file, col380_bytes(256, 4, blocks, 2));
    return file;
  }
};

// Runs `body` in a child; returns its exit status, or 128 + the signal that ended it.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    try {
      code = body();
    } catch (const InputError&) {
      code = 3;
    } catch (...) {
      code = 1;
    }
    std::_Exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(MappedFileTest, FileThatShrinksBeforeItIsReadIsAnInputError) {
  const std::string file = write_input("a.bin", 1);
  const io::BinaryFileInfo info = io::inspect_binary_any_width(file);
  ASSERT_EQ(::truncate(file.c_str(), 4096), 0);  // shrinks after inspection, before loading
  EXPECT_EQ(in_child([&] {
              const tools::MappedFile loaded(info);
              return 0;
            }),
            3);
  // Gone entirely, or emptied to nothing.
  ASSERT_EQ(::truncate(file.c_str(), 0), 0);
  EXPECT_EQ(in_child([&] {
              const tools::MappedFile loaded(info);
              return 0;
            }),
            3);
}

TEST_F(MappedFileTest, FileThatShrinksAfterItWasLoadedIsStillSummarisedAndComparedWhole) {
  const std::string a = write_input("a.bin", 2);
  const std::string b = write_input("b.bin", 3);
  const std::string a_bytes = read_bytes(a);
  EXPECT_EQ(in_child([&] {
              const tools::MappedFile fa(io::inspect_binary_any_width(a));
              const tools::MappedFile fb(io::inspect_binary_any_width(b));
              if (::truncate(a.c_str(), 12) != 0 || ::truncate(b.c_str(), 12) != 0) return 10;
              const tools::FileSummary s = tools::summarize_file(fa);
              if (s.k != 4096 || s.duplicates != 0 || !s.sorted) return 11;
              const tools::Comparison self = tools::compare_files(fa, fa, true);
              if (!self.equal() || self.expected_blocks != 4096 - s.zero_blocks) return 12;
              const tools::Comparison other = tools::compare_files(fa, fb, false);
              if (other.equal()) return 13;
              return 0;
            }),
            0);
  // The truncation happened (the child did not fail before it).
  EXPECT_EQ(read_bytes(a).size(), 12u);
  EXPECT_EQ(a_bytes.size(), 12u + 4096u * (8u + 2u * 16u));
}

// End to end: the tools report a file that is cut short between their size check and their read
// exactly as any truncated file (exit 3, bad input, for both tools), with a message.
TEST_F(MappedFileTest, ToolsReportATruncatedFileWithAMessage) {
  const std::string a = write_input("a.bin", 4);
  const std::string cut = path("cut.bin");
  write_bytes(cut, read_bytes(a).substr(0, 5000));
  const ToolRun info = run_tool("blockmm-info", {cut});
  EXPECT_EQ(info.exit_code, 3) << info.err;
  EXPECT_NE(info.err.find("blockmm-info: error: " + cut + ": truncated"), std::string::npos) << info.err;
  const ToolRun cmp = run_tool("blockmm-cmp", {a, cut});
  EXPECT_EQ(cmp.exit_code, 3) << cmp.err;
  EXPECT_NE(cmp.err.find("blockmm-cmp: error: " + cut), std::string::npos) << cmp.err;
}

}  // namespace
}  // namespace blockmm::testing
