// Outputs that cannot be written, against the real blockmm executable (label "fault"): a full
// device (/dev/full, a tiny tmpfs, through either writer) and a file-size limit (ulimit -f) in
// blockmm and its tools. In every case exit 4, one line, no output or temporary file, and an
// existing output untouched.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "e2e/fault/fault_support.hpp"

namespace blockmm::e2e {
namespace {

// ---------- full devices ----------

TEST(FaultOutput, DevFullBinaryGivesExit4) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const RunResult run = run_blockmm({dir / "A.bin", dir / "B.bin", "/dev/full", "--quiet"}, within(30));
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {"/dev/full"}));
  EXPECT_TRUE(temporaries("/dev", "full").empty()) << "a temporary file was left in /dev";
}

TEST(FaultOutput, DevFullHdf5GivesExit4) {
  ScratchDir dir("blockmm-fault");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const RunResult run = run_blockmm({dir / "A.bin", dir / "B.bin", "/dev/full", "--format", "h5", "--quiet"}, within(30));
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {"/dev/full"}));
  EXPECT_TRUE(temporaries("/dev", "full").empty()) << "a temporary file was left in /dev";
}

// inputs/A.bin x inputs/B.bin is 144 KB of output: more than the 64 KB tmpfs holds.
void run_on_tiny_tmpfs(const std::string& out_name, bool existing_output, const std::vector<std::string>& env = {}) {
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";
  ScratchDir dir("blockmm-fault");
  const std::string mnt = dir.subdir("mnt");
  MountedTmpfs tmpfs(mnt, 64);
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (" << tmpfs.why() << "): needs root";
  const std::string target = mnt + "/" + out_name;
  if (existing_output) write_text(target, kPrevious);
  RunOptions options = within(60);
  options.set_env.insert(options.set_env.end(), env.begin(), env.end());
  const RunResult run = run_blockmm({inputs + "/A.bin", inputs + "/B.bin", target, "--quiet"}, options);
  EXPECT_EQ(run.exit_code, 4) << run.describe();
  EXPECT_TRUE(one_error_line(run.err, {target}));
  EXPECT_EQ(list_dir(mnt), existing_output ? std::vector<std::string>{out_name} : std::vector<std::string>{})
      << "partial or temporary output left on the full file system";
  if (existing_output) {
    EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
  }
}

TEST(FaultOutput, TinyTmpfsBinaryGivesExit4AndKeepsExistingOutput) { run_on_tiny_tmpfs("C.bin", true); }
TEST(FaultOutput, TinyTmpfsHdf5GivesExit4AndLeavesNothing) { run_on_tiny_tmpfs("C.h5", false); }
// The same through the mapped writer (io/mapped_writer, which a few cores do not choose by
// default): on tmpfs its reservation checks the free space instead of fallocating.
TEST(FaultOutput, TinyTmpfsMappedWriterGivesExit4) {
  run_on_tiny_tmpfs("C.bin", true, {"BLOCKMM_WRITE_THREADS=2"});
  run_on_tiny_tmpfs("C.h5", false, {"BLOCKMM_WRITE_THREADS=2"});
}

// ---------- a file-size limit (ulimit -f) ----------

// Starts `argv` with RLIMIT_FSIZE set to `bytes` (SIGXFSZ left at its default, as a shell's
// `ulimit -f` leaves it): blockmm and its tools must report EFBIG as exit 4, not die by SIGXFSZ.
Finished run_with_file_size_limit(rlim_t bytes, const std::vector<std::string>& argv) {
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  struct rlimit limited = old;
  limited.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &limited);  // inherited by the child forked next; this process writes nothing meanwhile
  Child child(argv);
  ::setrlimit(RLIMIT_FSIZE, &old);
  return child.wait(120);
}

::testing::AssertionResult too_large_cleanly(const Finished& done, const std::string& tool, const std::string& target,
                                             const std::string& dir, const std::vector<std::string>& entries) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << done.describe(); };
  if (done.exit_code != 4) return failure("expected exit code 4");
  const std::vector<std::string> lines = split_lines(done.err);
  if (lines.size() != 1 || lines[0].rfind(tool + ": error: " + target + ": ", 0) != 0 ||
      lines[0].find("File too large") == std::string::npos)
    return failure("expected one line '" + tool + ": error: " + target + ": ... File too large'");
  if (list_dir(dir) != entries) return failure("partial or temporary output left");
  return ::testing::AssertionSuccess();
}

TEST(FaultOutput, FileSizeLimitGivesExit4InEveryProgram) {
  const std::string inputs = env_or("BLOCKMM_SOURCE_DIR") + "/inputs";  // 144 KB of product
  ScratchDir dir("blockmm-fault");
  const std::string out = dir.subdir("out");
  for (const std::string name : {"C.bin", "C.h5"}) {
    SCOPED_TRACE(name);
    write_text(out + "/" + name, kPrevious);
    const Finished done = run_with_file_size_limit(
        64 << 10, {blockmm_bin(), inputs + "/A.bin", inputs + "/B.bin", out + "/" + name, "--quiet"});
    EXPECT_TRUE(too_large_cleanly(done, "blockmm", out + "/" + name, out, {name}));
    EXPECT_EQ(slurp(out + "/" + name), kPrevious);
    ::unlink((out + "/" + name).c_str());
  }
  const Finished gen = run_with_file_size_limit(
      64 << 10, {build_dir() + "/blockmm-gen", "--n", "1024", "--m", "4", "--density", "0.5", "--max-value", "65535", "-q",
               out + "/G.bin"});
  EXPECT_TRUE(too_large_cleanly(gen, "blockmm-gen", out + "/G.bin", out, {}));
  const Finished convert =
      run_with_file_size_limit(64 << 10, {build_dir() + "/blockmm-convert", inputs + "/expected_C.bin", out + "/E.h5"});
  EXPECT_TRUE(too_large_cleanly(convert, "blockmm-convert", out + "/E.h5", out, {}));
}

}  // namespace
}  // namespace blockmm::e2e
