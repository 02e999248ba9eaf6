// Faults against the writer a rank of 4 or more threads takes on tmpfs (label "fault",
// docs/output.md): the output mapped once, its pages prepared by threads of their own beside the
// compute, in one file or in parts. The other fault tests run one thread, or a disk, and do not
// reach it. On a tmpfs mounted for the test (skipped where mounting is not allowed):
// - SIGTERM while the output is being written (.bin, .h5, .h5 in parts), the map made and its
//   pages being prepared: exit 128 + SIGTERM, nothing left, the existing output as it was. The
//   run stops there (BLOCKMM_TEST_PAUSE=numeric) until the signal comes: on a fast host a run
//   once committed before a signal timed by the temporary's size landed;
// - two runs at once into a tmpfs that holds one product but not two: whichever the pages run
//   out under (its reservation may have passed: the other run had not yet taken them) exits 4
//   with one line, no run leaves a temporary file or a part, and what is left is either nothing
//   or one whole product.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "e2e/fault/fault_support.hpp"

namespace blockmm::e2e {
namespace {

struct Output {
  const char* name;   // in the tmpfs
  const char* parts;  // --parts
};
const Output kOutputs[] = {{"C.bin", "off"}, {"C.h5", "off"}, {"C.h5", "3"}};

std::string label(const Output& output) { return std::string(output.name) + ", --parts " + output.parts; }

// n = 2048, m = 4, 5 % of the blocks: 13.6 MB of product (as .bin), a second or so on the
// reference backend.
class Inputs {
 public:
  static Inputs& get() {
    static Inputs instance;
    return instance;
  }
  std::string a() const { return dir_ / "A.bin"; }
  std::string b() const { return dir_ / "B.bin"; }

 private:
  Inputs() : dir_("blockmm-prepared-fault-inputs") {
    for (const auto& [name, seed] : {std::pair<const char*, const char*>{"A.bin", "1"}, {"B.bin", "2"}}) {
      const RunResult gen = run_process({build_dir() + "/blockmm-gen", "--n", "2048", "--m", "4", "--density", "0.05",
                                         "--seed", seed, "--quiet", dir_ / name});
      if (gen.exit_code != 0) throw std::runtime_error("blockmm-gen failed: " + gen.describe());
    }
  }
  ScratchDir dir_;
};

// --threads 4 on tmpfs: mapped, with huge folios where the kernel makes them, pages prepared ahead.
std::vector<std::string> prepared_run(const std::string& a, const std::string& b, const std::string& out,
                                      const Output& output, const char* backend) {
  return {blockmm_bin(), a, b, out, "--backend", backend, "--threads", "4", "--parts", output.parts, "--quiet"};
}

TEST(FaultPrepared, SigtermWhileThePagesArePreparedLeavesTheExistingOutput) {
  const Inputs& inputs = Inputs::get();
  for (const Output& output : kOutputs) {
    SCOPED_TRACE(label(output));
    ScratchDir dir("blockmm-prepared-fault");
    const std::string mnt = dir.subdir("mnt");
    MountedTmpfs tmpfs(mnt, 256 << 10);
    if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (" << tmpfs.why() << "): needs root";
    const std::string target = mnt + "/" + output.name;
    write_text(target, kPrevious);
    // The run stops as its numeric phase starts: the output begun (the temporary made and
    // mapped, its pages being prepared; a parted output's parts too), nothing committed.
    Child child(prepared_run(inputs.a(), inputs.b(), target, output, "cpu"), {"BLOCKMM_TEST_PAUSE=numeric"});
    const auto begin = Clock::now();
    while (child.err().find("its output begun; pausing") == std::string::npos && !child.exited() && since(begin) < 120)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_NE(child.err().find("its output begun; pausing"), std::string::npos)
        << "the run never reached its numeric phase\n" << child.wait(10).describe();
    ASSERT_FALSE(wait_for_temporary(child, mnt, output.name, 0, 10).empty()) << "no temporary output while it writes";
    ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);
    const Finished done = child.wait(60);
    EXPECT_FALSE(done.timed_out) << done.describe();
    EXPECT_EQ(done.exit_code, 128 + SIGTERM) << done.describe();
    EXPECT_EQ(list_dir(mnt), std::vector<std::string>{output.name}) << "a temporary file or a part was left";
    EXPECT_EQ(slurp(target), kPrevious) << "the existing output was changed";
  }
}

TEST(FaultPrepared, TwoRunsIntoATmpfsThatHoldsOneProductLeaveOneWholeOrNothing) {
  ScratchDir dir("blockmm-prepared-fault");
  const std::string a = Inputs::get().a(), b = Inputs::get().b();
  for (const Output& output : kOutputs) {
    SCOPED_TRACE(label(output));
    // The product once, on the disk: what a whole output holds (13.6 MB as .bin).
    const std::string expected = dir / (std::string("expected-") + output.name);
    const RunResult once = run_blockmm({a, b, expected, "--parts", "off", "--quiet"}, within(120));
    ASSERT_EQ(once.exit_code, 0) << once.describe();
    const std::string mnt = dir.subdir(std::string("mnt-") + output.name + output.parts);
    MountedTmpfs tmpfs(mnt, 20 << 10);  // one product and its metadata, not two
    if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs on " << mnt << " (" << tmpfs.why() << "): needs root";
    const std::string target = mnt + "/" + output.name;
    Child first(prepared_run(a, b, target, output, "cpu"));
    Child second(prepared_run(a, b, target, output, "cpu"));
    int failed = 0;
    for (Child* run : {&first, &second}) {
      const Finished done = run->wait(120);
      EXPECT_TRUE(done.exit_code == 0 || done.exit_code == 4) << done.describe();
      if (done.exit_code != 4) continue;
      ++failed;
      EXPECT_TRUE(one_error_line(done.err, {target})) << done.describe();
    }
    EXPECT_GE(failed, 1) << "two products fitted a tmpfs that holds one";
    const std::vector<std::string> left = list_dir(mnt);
    if (failed == 2) {
      EXPECT_TRUE(left.empty()) << left.size() << " files left where both runs failed";
      continue;
    }
    // One run's product, whole: the main file (and its parts); the parted one joined is the product.
    ASSERT_EQ(left.size(), std::string(output.parts) == "off" ? 1u : 4u) << "a temporary file or a stray part was left";
    std::string whole = target;
    if (std::string(output.parts) != "off") {
      whole = dir / "joined.h5";
      const RunResult join = run_process({build_dir() + "/blockmm-convert", target, whole});
      ASSERT_EQ(join.exit_code, 0) << join.describe();
    }
    EXPECT_TRUE(read_bytes(whole) == read_bytes(expected)) << "the product left is not the whole product";
  }
}

}  // namespace
}  // namespace blockmm::e2e
