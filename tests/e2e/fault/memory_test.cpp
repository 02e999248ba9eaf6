// blockmm under memory limits (label "fault"): an address-space limit (RLIMIT_AS, set in the
// child by `ulimit -v`) swept from below what the dynamic loader needs to above what the run
// needs. Every run must end with exit 0 and the right product, or exit 5 and one error line;
// never abort (134, an exception that left an OpenMP region), never libgomp's exit 1, and never
// a temporary file left behind. Also: tiny files whose header claims a huge n must cost memory
// in proportion to their records, not to n. ASan reserves terabytes of shadow memory, so the
// RLIMIT_AS sweep skips itself in sanitizer builds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "support/harness.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

std::string tool(const std::string& name) { return env_or("BLOCKMM_BUILD_DIR") + "/" + name; }

// Runs blockmm with `args` under `ulimit -v kb` (kb = 0: unlimited); returns the result and
// the child's peak RSS.
struct Limited {
  RunResult run;
  long max_rss_kb = 0;
};
Limited run_limited(long kb, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"bash", "-c", (kb > 0 ? "ulimit -v " + std::to_string(kb) + " && " : std::string()) +
                                                     "exec \"$0\" \"$@\"",
                                   blockmm_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options;
  options.timeout_seconds = 60;
  // The sweep is about the row arrays over all n/m block-rows (allocated inside OpenMP regions),
  // which compact labels would otherwise avoid for these inputs (partition/relabel.hpp).
  options.set_env = {"BLOCKMM_RELABEL=off"};
  struct rusage before {};
  ::getrusage(RUSAGE_CHILDREN, &before);
  Limited out;
  out.run = run_process(argv, options);
  struct rusage after {};
  ::getrusage(RUSAGE_CHILDREN, &after);
  // RUSAGE_CHILDREN's ru_maxrss is the largest of all waited-for children so far: meaningful
  // when it grew, else at most the previous maximum (reported as that bound).
  out.max_rss_kb = after.ru_maxrss;
  return out;
}

class FaultMemory : public ::testing::Test {
 protected:
  ScratchDir dir{"blockmm-fault-memory"};
};

// n = 2^23, m = 1, 10 000 blocks each: the symbolic phase's per-thread arrays over n/m columns
// are allocated inside its OpenMP region, where std::bad_alloc used to abort the process.
TEST_F(FaultMemory, AddressSpaceLimitGivesExitFiveOrTheRightProductNeverAnAbort) {
#ifdef BLOCKMM_TEST_ASAN
  GTEST_SKIP() << "ASan reserves terabytes of address space: RLIMIT_AS cannot be tested under it";
#endif
  const std::string a = dir / "A.bin", b = dir / "B.bin";
  for (const auto& [path, seed] : {std::pair<std::string, const char*>{a, "1"}, {b, "2"}}) {
    const RunResult gen = run_process({tool("blockmm-gen"), path, "--n", "8388608", "--m", "1", "--k", "10000", "--max-value", "65535",
                                       "--seed", seed, "-q"});
    ASSERT_EQ(gen.exit_code, 0) << gen.describe();
  }
  const std::string out_dir = dir.subdir("out");
  const std::string out = out_dir + "/C.bin";
  const Limited free_run = run_limited(0, {"-q", "--threads", "2", "--backend", "cpu", a, b, out});
  ASSERT_EQ(free_run.run.exit_code, 0) << free_run.run.describe();
  const std::vector<std::byte> expected = read_bytes(out);
  {
    InputRecords ra, rb;
    ASSERT_EQ(load(a, ra), "");
    ASSERT_EQ(load(b, rb), "");
    ASSERT_EQ(expected, encode(sparse_oracle(ra, rb)));
  }
  std::remove(out.c_str());

  int out_of_memory = 0, succeeded = 0;
  for (long kb = 24 * 1024; kb < 8L * 1024 * 1024 && succeeded < 2; kb = kb * 9 / 8) {
    const Limited limited = run_limited(kb, {"-q", "--threads", "2", "--backend", "cpu", a, b, out});
    const RunResult& run = limited.run;
    SCOPED_TRACE("ulimit -v " + std::to_string(kb));
    if (run.exit_code == 127 && run.err.find("error while loading shared libraries") != std::string::npos)
      continue;  // below what the dynamic loader needs: blockmm never ran
    ASSERT_FALSE(run.timed_out) << run.describe();
    ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 5) << run.describe();
    if (run.exit_code == 5) {
      ++out_of_memory;
      const std::vector<std::string> lines = split_lines(run.err);
      EXPECT_EQ(lines.size(), 1u) << run.describe();
      EXPECT_EQ(run.err.rfind("blockmm: error: ", 0), 0u) << run.describe();
      EXPECT_TRUE(list_dir(out_dir).empty()) << run.describe();
    } else {
      ++succeeded;
      EXPECT_EQ(read_bytes(out), expected);
      EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.bin"});
      std::remove(out.c_str());
    }
  }
  EXPECT_GT(out_of_memory, 0) << "no limit made the run fail: the sweep tested nothing";
  EXPECT_GT(succeeded, 0) << "no limit let the run succeed";
}

// Runs argv to its end (60 s at most) and returns its exit code and peak RSS (wait4).
Limited run_measured(const std::vector<std::string>& argv) {
  ScratchDir capture("blockmm-fault-memory-capture");
  RunOptions options;
  const pid_t pid = spawn_process(argv, options, capture / "out", capture / "err");
  Limited out;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int status = 0;
    struct rusage usage {};
    if (::wait4(pid, &status, WNOHANG, &usage) == pid) {
      out.run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      out.max_rss_kb = usage.ru_maxrss;
      break;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60) && !out.run.timed_out) {
      out.run.timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream err(capture / "err");
  std::ostringstream text;
  text << err.rdbuf();
  out.run.err = text.str();
  return out;
}

// A 12-byte file may claim n = 2^28 or 2^31 - 1 (m = 1) and no blocks: such a run used to
// allocate row arrays over all n/m block-rows (11.7 GB for n = 2^28). An empty operand now
// makes the empty product without them: the run stays within a few MB of a tiny valid run,
// and the other operand is still checked (a duplicate in it is exit 3).
TEST_F(FaultMemory, EmptyOperandWithHugeNCostsMemoryByRecordsNotByN) {
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(dir / "small_a.bin", encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}})));
  write_bytes(dir / "small_b.bin", encode(make_records(16, 4, {{0, 1, fill(4)}, {2, 0, fill(5)}})));
  const std::string out_dir = dir.subdir("out");
  const Limited baseline = run_measured({blockmm_bin(), "-q", "--threads", "1", dir / "small_a.bin", dir / "small_b.bin",
                                         out_dir + "/C.bin"});
  ASSERT_EQ(baseline.run.exit_code, 0) << baseline.run.describe();
  std::remove((out_dir + "/C.bin").c_str());

  const auto record = [](std::int32_t i, std::int32_t j, std::uint16_t v) {
    std::vector<std::byte> bytes(10);
    std::memcpy(bytes.data(), &i, 4);
    std::memcpy(bytes.data() + 4, &j, 4);
    std::memcpy(bytes.data() + 8, &v, 2);
    return bytes;
  };
  for (const std::int32_t n : {std::int32_t{1} << 28, std::int32_t{2147483647}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::string empty = dir / "empty.bin", one = dir / "one.bin", twice = dir / "twice.bin";
    write_bytes(empty, encode_with_header(n, 1, 0, {}));
    write_bytes(one, encode_with_header(n, 1, 1, record(5, n - 1, 3)));
    std::vector<std::byte> two = record(n - 2, 7, 3);
    const std::vector<std::byte> again = record(n - 2, 7, 9);
    two.insert(two.end(), again.begin(), again.end());
    write_bytes(twice, encode_with_header(n, 1, 2, two));
    for (const auto& [a, b] : {std::pair<std::string, std::string>{empty, empty}, {empty, one}, {one, empty}}) {
      SCOPED_TRACE(a + " x " + b);
      const Limited run = run_measured({blockmm_bin(), "-q", "--threads", "1", a, b, out_dir + "/C.bin"});
      EXPECT_EQ(run.run.exit_code, 0) << run.run.describe();
      EXPECT_EQ(read_bytes(out_dir + "/C.bin"), encode_with_header(n, 1, 0, {}));
      EXPECT_LT(run.max_rss_kb, baseline.max_rss_kb + 16 * 1024) << "tiny valid run: " << baseline.max_rss_kb << " KB";
      std::cout << "[ info ] n = " << n << ": peak RSS " << run.max_rss_kb << " KB (tiny valid run: "
                << baseline.max_rss_kb << " KB)\n";
      std::remove((out_dir + "/C.bin").c_str());
    }
    const Limited dup = run_measured({blockmm_bin(), "-q", "--threads", "1", empty, twice, out_dir + "/C.bin"});
    EXPECT_EQ(dup.run.exit_code, 3) << dup.run.describe();
    EXPECT_EQ(dup.run.err, "blockmm: error: " + twice + ": duplicate block (" + std::to_string(n - 2) +
                               ", 7) at records 0 and 1 (byte offsets 12 and 22)\n");
    EXPECT_LT(dup.max_rss_kb, baseline.max_rss_kb + 16 * 1024);
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
}

// Peak RSS of a tiny valid run (two 16 x 16 matrices of 4 x 4 blocks): what every run costs.
long tiny_run_rss_kb(ScratchDir& dir) {
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(dir / "tiny_a.bin", encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}})));
  write_bytes(dir / "tiny_b.bin", encode(make_records(16, 4, {{0, 1, fill(4)}, {2, 0, fill(5)}})));
  const std::string out = dir / "tiny_c.bin";
  const Limited run = run_measured({blockmm_bin(), "-q", "--threads", "1", dir / "tiny_a.bin", dir / "tiny_b.bin", out});
  EXPECT_EQ(run.run.exit_code, 0) << run.run.describe();
  std::remove(out.c_str());
  return run.max_rss_kb;
}

// k = 1, 10 and 1000 random blocks with n = 2^28 (m = 1 and 4): the run used to cost about 44
// bytes a block-row (11 GB for m = 1) in row arrays over all n/m block-rows. The pipeline now
// runs on compact labels of the indices in use: within a few MB of a tiny run, for the cpu and
// reference backends, and the product is exact (an oracle over record pairs, not over rows).
// HDF5 output holds n/m + 1 /indptr entries in the file itself, so it is checked at n = 2^24
// (128 MB of /indptr, written in bounded pieces), read back through blockmm-convert.
TEST_F(FaultMemory, FewRecordsWithHugeNCostMemoryByRecordsNotByN) {
  const long baseline = tiny_run_rss_kb(dir);
  const std::string out_dir = dir.subdir("out");
  std::mt19937_64 rng(1717);
  struct Case {
    std::int32_t n, m;
    std::int64_t k;
    const char* format;
  };
  const std::vector<Case> cases = {{1 << 28, 1, 1, "bin"},  {1 << 28, 1, 10, "bin"}, {1 << 28, 1, 1000, "bin"},
                                   {1 << 28, 4, 10, "bin"}, {1 << 28, 4, 1000, "bin"}, {1 << 24, 1, 1000, "h5"},
                                   {1 << 24, 4, 10, "h5"}};
  for (const Case& c : cases) {
    const std::int32_t p = c.n / c.m;
    // Indices from a pool of about sqrt(k) + 2, both ends of [0, p) included: products exist.
    std::vector<std::int32_t> pool = {0, p - 1};
    std::uniform_int_distribution<std::int32_t> any(1, p - 2);
    while (pool.size() * pool.size() < static_cast<std::size_t>(2 * c.k)) pool.push_back(any(rng));
    const InputRecords a = blocks_among(c.n, c.m, pool, c.k, rng), b = blocks_among(c.n, c.m, pool, c.k, rng);
    const std::string pa = dir / "huge_a.bin", pb = dir / "huge_b.bin";
    write_bytes(pa, encode(a));
    write_bytes(pb, encode(b));
    const std::vector<std::byte> expected = encode(pair_oracle(a, b));
    for (const char* backend : {"cpu", "reference"}) {
      SCOPED_TRACE("n = " + std::to_string(c.n) + ", m = " + std::to_string(c.m) + ", k = " + std::to_string(c.k) + ", " +
                   backend + ", " + c.format);
      const std::string out = out_dir + "/C." + c.format;
      const Limited run = run_measured({blockmm_bin(), "-q", "--threads", "1", "--backend", backend, pa, pb, out});
      ASSERT_EQ(run.run.exit_code, 0) << run.run.describe();
      EXPECT_LT(run.max_rss_kb, baseline + 16 * 1024) << "tiny valid run: " << baseline << " KB";
      std::cout << "[ info ] n = " << c.n << ", m = " << c.m << ", k = " << c.k << ", " << backend << ", " << c.format
                << ": peak RSS " << run.max_rss_kb << " KB (tiny valid run: " << baseline << " KB)\n";
      if (std::string(c.format) == "bin") {
        EXPECT_TRUE(read_bytes(out) == expected) << "the product differs from the oracle";
      } else {
        const std::string as_binary = dir / "C_from_h5.bin";
        const RunResult back = run_process({tool("blockmm-convert"), out, as_binary});
        ASSERT_EQ(back.exit_code, 0) << back.describe();
        EXPECT_TRUE(read_bytes(as_binary) == expected) << "the HDF5 product differs from the oracle";
        std::remove(as_binary.c_str());
      }
      std::remove(out.c_str());
    }
  }
}

// A B three times --host-memory (issue 51) is read from its file in block-column panels: the
// product is the unlimited run's, byte for byte, and the process's peak RSS stays within the
// budget plus A's rows and an output chunk, beside what every run costs; the unlimited run, which
// holds all of B, exceeds that bound, so the bound tells the two apart. Output through pwrite
// (a shared map of a tmpfs output would count in the RSS). The test holds no file in memory:
// posix_spawn shares its memory with the child until the exec, whose peak the child inherits.
TEST_F(FaultMemory, BThreeTimesTheHostMemoryIsReadFromItsFileWithinTheBudget) {
#ifdef BLOCKMM_TEST_ASAN
  GTEST_SKIP() << "ASan's shadow memory and quarantine count in the RSS";
#endif
  const long baseline = tiny_run_rss_kb(dir);
  const std::string a = dir / "A.bin", b = dir / "B.bin", out = dir.subdir("out") + "/C.bin", whole = dir / "C_whole.bin";
  // n = 16 384, m = 8: B 720 000 blocks (98 MB); A 512 blocks (a thin product of 46 MB).
  for (const auto& [path, k, seed] : {std::tuple<std::string, const char*, const char*>{a, "512", "5"}, {b, "720000", "6"}}) {
    const RunResult gen = run_process({tool("blockmm-gen"), path, "--n", "16384", "--m", "8", "--k", k, "--seed", seed, "-q"});
    ASSERT_EQ(gen.exit_code, 0) << gen.describe();
  }
  const auto a_bytes = static_cast<std::int64_t>(std::filesystem::file_size(a));
  const auto b_bytes = static_cast<std::int64_t>(std::filesystem::file_size(b));
  const std::int64_t budget = b_bytes / 3, chunk = std::int64_t{2} << 20;
  const auto run = [&](const std::vector<std::string>& extra, double& seconds) {
    std::vector<std::string> argv = {"env", "BLOCKMM_IO=pwrite", blockmm_bin(), "-q", "--threads", "2", "--backend",
                                     "cpu", "--chunk-size", "2M", "--stats-file", dir / "stats.json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {a, b, out});
    const auto start = std::chrono::steady_clock::now();
    const Limited result = run_measured(argv);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(result.run.exit_code, 0) << result.run.describe();
    return result;
  };
  double unlimited_seconds = 0, limited_seconds = 0;
  const Limited unlimited = run({}, unlimited_seconds);
  std::filesystem::rename(out, whole);
  const Limited limited = run({"--host-memory", std::to_string(budget)}, limited_seconds);
  EXPECT_EQ(run_process({"cmp", "-s", whole, out}).exit_code, 0) << "the product differs from the unlimited run's";
  std::ifstream stats(dir / "stats.json");
  const std::string stats_text((std::istreambuf_iterator<char>(stats)), std::istreambuf_iterator<char>());
  EXPECT_NE(stats_text.find("panels over 1 cpu backends, streamed, read from its file"), std::string::npos) << stats_text;
  const long bound_kb = baseline + static_cast<long>((budget + a_bytes + chunk) >> 10);
  EXPECT_LT(limited.max_rss_kb, bound_kb) << "tiny valid run: " << baseline << " KB";
  EXPECT_GT(unlimited.max_rss_kb, bound_kb) << "the unlimited run fits the bound: the test tells nothing";
  std::cout << "[ info ] B " << (b_bytes >> 20) << " MiB, --host-memory " << (budget >> 20) << " MiB: peak RSS "
            << limited.max_rss_kb / 1024 << " MiB in " << limited_seconds << " s; unlimited " << unlimited.max_rss_kb / 1024
            << " MiB in " << unlimited_seconds << " s; bound " << bound_kb / 1024 << " MiB (tiny run " << baseline / 1024
            << " MiB)\n";
}

// A duplicate block in a relabelled run is named by the file's indices and records.
TEST_F(FaultMemory, DuplicateWithHugeNIsNamedByTheFilesIndices) {
  const std::int32_t n = 1 << 28;
  const std::string out_dir = dir.subdir("out");
  const auto record = [](std::int32_t i, std::int32_t j, std::uint16_t v) {
    std::vector<std::byte> bytes(10);
    std::memcpy(bytes.data(), &i, 4);
    std::memcpy(bytes.data() + 4, &j, 4);
    std::memcpy(bytes.data() + 8, &v, 2);
    return bytes;
  };
  std::vector<std::byte> three = record(3, n - 2, 1);
  for (const auto& more : {record(n - 2, 7, 3), record(n - 2, 7, 9)}) three.insert(three.end(), more.begin(), more.end());
  write_bytes(dir / "twice.bin", encode_with_header(n, 1, 3, three));
  write_bytes(dir / "one.bin", encode_with_header(n, 1, 1, record(5, n - 2, 3)));
  for (const auto& [a, b] : {std::pair<std::string, std::string>{dir / "one.bin", dir / "twice.bin"},
                             {dir / "twice.bin", dir / "one.bin"}}) {
    const Limited run = run_measured({blockmm_bin(), "-q", "--threads", "1", a, b, out_dir + "/C.bin"});
    EXPECT_EQ(run.run.exit_code, 3) << run.run.describe();
    EXPECT_EQ(run.run.err, "blockmm: error: " + dir / "twice.bin" + ": duplicate block (" + std::to_string(n - 2) +
                               ", 7) at records 1 and 2 (byte offsets 22 and 32)\n");
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
}

// Runs a tool (argv) to its end, under `ulimit -v kb` unless ASan reserves the address space,
// with two OpenMP threads (each thread's stack and malloc arena take address space too).
Limited run_tool_measured(long kb, std::vector<std::string> argv) {
#ifndef BLOCKMM_TEST_ASAN
  argv.insert(argv.begin(), {"bash", "-c", "ulimit -v " + std::to_string(kb) + " && OMP_NUM_THREADS=2 exec \"$0\" \"$@\""});
#else
  (void)kb;
  argv.insert(argv.begin(), {"env", "OMP_NUM_THREADS=2"});
#endif
  return run_measured(argv);
}

// blockmm-info, -cmp and -convert on files whose header claims n = 2^28 or 2^31 - 1 (m = 1) with
// none or a few blocks: they used to hold arrays over all n/m block-rows (2 to 4 GiB at 2^28,
// killed under a job's memory limit without a word). Their memory now follows the records, as
// blockmm's own does: under a 1.5 GiB address-space limit, within a few MB of a tiny file's run.
// HDF5 output holds n/m + 1 /indptr entries in the file, so bin -> h5 -> bin runs at n = 2^24.
TEST_F(FaultMemory, ToolsCostMemoryByRecordsNotByN) {
  constexpr long kLimitKb = 1536L * 1024;
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(dir / "tiny.bin", encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}})));
  const Limited tiny = run_tool_measured(kLimitKb, {tool("blockmm-info"), dir / "tiny.bin"});
  ASSERT_EQ(tiny.run.exit_code, 0) << tiny.run.describe();
  const long baseline = tiny.max_rss_kb;

  const auto record = [](std::int32_t i, std::int32_t j, std::uint16_t v) {
    std::vector<std::byte> bytes(10);
    std::memcpy(bytes.data(), &i, 4);
    std::memcpy(bytes.data() + 4, &j, 4);
    std::memcpy(bytes.data() + 8, &v, 2);
    return bytes;
  };
  const auto records = [&](std::int32_t n, const std::vector<std::array<std::int32_t, 3>>& blocks) {
    std::vector<std::byte> bytes;
    for (const auto& [i, j, v] : blocks) {
      const std::vector<std::byte> one = record(i, j, static_cast<std::uint16_t>(v));
      bytes.insert(bytes.end(), one.begin(), one.end());
    }
    return encode_with_header(n, 1, static_cast<std::int32_t>(blocks.size()), bytes);
  };
  const auto check = [&](const std::vector<std::string>& argv, int code) {
    std::string shown;
    for (std::size_t x = 0; x < argv.size(); ++x) shown += (x > 0 ? " " : "") + argv[x].substr(argv[x].rfind('/') + 1);
    SCOPED_TRACE(shown);
    const Limited run = run_tool_measured(kLimitKb, argv);
    EXPECT_EQ(run.run.exit_code, code) << run.run.describe();
    EXPECT_LT(run.max_rss_kb, baseline + 16 * 1024) << "a tiny file: " << baseline << " KB";
    std::cout << "[ info ] " << shown << ": peak RSS " << run.max_rss_kb << " KB (a tiny file: " << baseline << " KB)\n";
  };
  const std::string out_dir = dir.subdir("out");
  for (const std::int32_t n : {std::int32_t{1} << 28, std::int32_t{2147483647}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::string empty = dir / "empty.bin", few = dir / "few.bin", shuffled = dir / "shuffled.bin";
    // Rows at both ends of [0, n); `shuffled` holds the same blocks out of order.
    const std::vector<std::array<std::int32_t, 3>> blocks = {{0, 7, 9}, {5, 3, 4}, {5, n - 1, 3}, {n - 2, 0, 1}};
    write_bytes(empty, encode_with_header(n, 1, 0, {}));
    write_bytes(few, records(n, blocks));
    write_bytes(shuffled, records(n, {blocks[3], blocks[1], blocks[0], blocks[2]}));
    for (const std::string& file : {empty, few, shuffled}) {
      check({tool("blockmm-info"), file}, 0);
      check({tool("blockmm-info"), "--json", file}, 0);
    }
    check({tool("blockmm-cmp"), empty, empty}, 0);
    check({tool("blockmm-cmp"), "--strict", few, shuffled}, 1);  // equal, but not sorted
    check({tool("blockmm-cmp"), shuffled, few}, 0);
    check({tool("blockmm-cmp"), empty, few}, 1);
    const std::string sorted = out_dir + "/sorted.bin";
    check({tool("blockmm-convert"), shuffled, sorted}, 0);
    EXPECT_EQ(read_bytes(sorted), read_bytes(few)) << "blockmm-convert sorts the blocks";
    check({tool("blockmm-convert"), empty, sorted}, 0);
    EXPECT_EQ(read_bytes(sorted), read_bytes(empty));
    std::remove(sorted.c_str());
  }
  // Through HDF5 and back: the rows of /indptr come from the blocks, written in bounded pieces.
  const std::int32_t n = 1 << 24;
  const std::vector<std::array<std::int32_t, 3>> blocks = {{0, 7, 9}, {5, 3, 4}, {5, n - 1, 3}, {n - 2, 0, 1}};
  write_bytes(dir / "few24.bin", records(n, {blocks[2], blocks[0], blocks[3], blocks[1]}));
  const std::string h5 = out_dir + "/few24.h5", back = out_dir + "/back.bin";
  check({tool("blockmm-convert"), dir / "few24.bin", h5}, 0);
  check({tool("blockmm-info"), h5}, 0);
  check({tool("blockmm-convert"), h5, back}, 0);
  EXPECT_EQ(read_bytes(back), records(n, blocks)) << "bin -> h5 -> bin gives the blocks back, sorted";
  check({tool("blockmm-cmp"), h5, dir / "few24.bin"}, 0);
}

}  // namespace
}  // namespace blockmm::e2e
