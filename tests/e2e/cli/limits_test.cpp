// The limits blockmm and blockmm-gen enforce before anything is created (label "cli"): thread
// counts (--threads, OMP_NUM_THREADS) above kMaxThreads are usage errors (exit 2) naming the
// limit, where libgomp used to abort after the temporary output existed; block orders above
// 46340, whose in-block indices r*m + c would overflow int32, are refused in binary and HDF5
// inputs (exit 3) and by blockmm-gen (exit 2), while m = 46340 itself is accepted.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "support/harness.hpp"
#include "core/thread_limit.hpp"

namespace blockmm::e2e {
namespace {

// A small valid pair (n = 16, m = 4).
void write_small_inputs(const std::string& a, const std::string& b) {
  const auto fill = [](std::uint16_t v) { return std::vector<std::uint16_t>(16, v); };
  write_bytes(a, encode(make_records(16, 4, {{0, 0, fill(1)}, {1, 2, fill(2)}, {3, 3, fill(3)}})));
  write_bytes(b, encode(make_records(16, 4, {{0, 1, fill(4)}, {2, 0, fill(5)}, {3, 2, fill(6)}})));
}

::testing::AssertionResult one_error_line(const RunResult& run, const std::string& prefix,
                                          const std::vector<std::string>& fragments) {
  const std::vector<std::string> lines = split_lines(run.err);
  if (lines.empty() || lines[0].rfind(prefix, 0) != 0)
    return ::testing::AssertionFailure() << "expected '" << prefix << "...' on stderr\n" << run.describe();
  for (const std::string& f : fragments)
    if (lines[0].find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks '" << f << "'\n" << run.describe();
  return ::testing::AssertionSuccess();
}

std::string tool(const std::string& name) { return env_or("BLOCKMM_BUILD_DIR") + "/" + name; }

TEST(Limits, ThreadCountsAboveTheLimitAreUsageErrorsBeforeAnyFileExists) {
  ScratchDir dir("blockmm-limits");
  write_small_inputs(dir / "A.bin", dir / "B.bin");
  const std::string out_dir = dir.subdir("out");
  const std::string limit = std::to_string(kMaxThreads);
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{"--threads", "50000"}, {}, "--threads 50000"},
      {{"--threads", "65535"}, {}, "--threads 65535"},
      {{"--threads", std::to_string(kMaxThreads + 1)}, {}, "--threads " + std::to_string(kMaxThreads + 1)},
      {{}, {"OMP_NUM_THREADS=100000"}, "OMP_NUM_THREADS=100000"},
      {{}, {"OMP_NUM_THREADS=4,100000"}, "OMP_NUM_THREADS=4,100000"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.named);
    std::vector<std::string> args = {dir / "A.bin", dir / "B.bin", out_dir + "/C.bin", "--quiet"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunOptions options;
    options.set_env = c.env;
    const RunResult run = run_blockmm(args, options);
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    EXPECT_TRUE(one_error_line(run, "blockmm: error: ", {c.named, limit}));
    EXPECT_TRUE(list_dir(out_dir).empty());

    std::vector<std::string> gen = {tool("blockmm-gen"), out_dir + "/G.bin", "--n", "8", "--m", "2", "--k", "3", "-q"};
    gen.insert(gen.end(), c.args.begin(), c.args.end());
    const RunResult gen_run = run_process(gen, options);
    EXPECT_EQ(gen_run.exit_code, 2) << gen_run.describe();
    EXPECT_TRUE(one_error_line(gen_run, "blockmm-gen: error: ", {c.named, limit}));
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
  // blockmm-info and blockmm-cmp have no --threads: OMP_NUM_THREADS alone is checked.
  for (const char* name : {"blockmm-info", "blockmm-cmp"}) {
    std::vector<std::string> argv = {tool(name), dir / "A.bin"};
    if (std::string(name) == "blockmm-cmp") argv.push_back(dir / "A.bin");
    RunOptions options;
    options.set_env = {"OMP_NUM_THREADS=65535"};
    const RunResult run = run_process(argv, options);
    EXPECT_EQ(run.exit_code, 2) << run.describe();  // a usage error for both
    EXPECT_TRUE(one_error_line(run, std::string(name) + ": error: ", {"OMP_NUM_THREADS=65535", limit}));
  }
  // The limit itself is allowed, and --threads overrides a huge OMP_NUM_THREADS, which libgomp
  // then never uses (the product must still be right: compare with a one-thread run).
  RunOptions huge_env;
  huge_env.set_env = {"OMP_NUM_THREADS=100000"};
  const RunResult one = run_blockmm({dir / "A.bin", dir / "B.bin", out_dir + "/one.bin", "--threads", "1", "-q"}, huge_env);
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  const RunResult many =
      run_blockmm({dir / "A.bin", dir / "B.bin", out_dir + "/many.bin", "--threads", "64", "--backend", "cpu", "-q"});
  ASSERT_EQ(many.exit_code, 0) << many.describe();
  EXPECT_EQ(read_bytes(out_dir + "/one.bin"), read_bytes(out_dir + "/many.bin"));
  OutputRecords product;
  ASSERT_EQ(load(out_dir + "/one.bin", product), "");
  InputRecords a, b;
  ASSERT_EQ(load(dir / "A.bin", a), "");
  ASSERT_EQ(load(dir / "B.bin", b), "");
  EXPECT_EQ(encode(product), encode(sparse_oracle(a, b)));
}

// An HDF5 BSR input without blocks: n = m (one block-row), nnzb = 0.
void write_empty_bsr(const std::string& path, std::int64_t n, std::int64_t m) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const auto int_attr = [&](const char* name, std::int64_t value) {
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(file, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &value), 0);
    H5Aclose(attr);
    H5Sclose(space);
  };
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, 11);
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t format = H5Acreate2(file, "format", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(format, type, "blockmm-bsr"), 0);
  H5Aclose(format);
  H5Sclose(scalar);
  H5Tclose(type);
  int_attr("version", 1);
  int_attr("n", n);
  int_attr("m", m);
  int_attr("nnzb", 0);
  const auto dataset = [&](const char* name, hid_t stored, std::vector<hsize_t> dims, const void* values, hid_t mem) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t set = H5Dcreate2(file, name, stored, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(set, 0);
    if (values != nullptr) {
      ASSERT_GE(H5Dwrite(set, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    }
    H5Dclose(set);
    H5Sclose(space);
  };
  const std::vector<std::int64_t> indptr(static_cast<std::size_t>(n / m + 1), 0);
  dataset("indptr", H5T_STD_I64LE, {indptr.size()}, indptr.data(), H5T_NATIVE_INT64);
  dataset("indices", H5T_STD_I32LE, {0}, nullptr, H5T_NATIVE_INT32);
  dataset("data", H5T_STD_U16LE, {0, static_cast<hsize_t>(m), static_cast<hsize_t>(m)}, nullptr, H5T_NATIVE_UINT16);
  ASSERT_GE(H5Fclose(file), 0);
}

TEST(Limits, BlockOrderAbove46340IsRefusedInEveryFormat) {
  ScratchDir dir("blockmm-limits");
  const std::string out_dir = dir.subdir("out");
  // 2^31 - 1 too: above the order whose record size int64 holds, the message still names 46340.
  for (const std::int32_t m : {46341, 65536, 1 << 30, 2147483647}) {
    SCOPED_TRACE("m = " + std::to_string(m));
    const std::string bin = dir / ("m" + std::to_string(m) + ".bin");
    write_bytes(bin, encode_with_header(m, m, 0, {}));  // a consistent file without blocks
    {
      const RunResult run = run_blockmm({bin, bin, out_dir + "/C.bin", "-q"});
      EXPECT_EQ(run.exit_code, 3) << run.describe();
      EXPECT_TRUE(one_error_line(run, "blockmm: error: " + bin + ": ", {"m = " + std::to_string(m), "46340"}));
    }
    const std::string h5 = dir / ("m" + std::to_string(m) + ".h5");
    write_empty_bsr(h5, m, m);
    const RunResult run = run_blockmm({h5, h5, out_dir + "/C.bin", "-q"});
    EXPECT_EQ(run.exit_code, 3) << run.describe();
    EXPECT_TRUE(one_error_line(run, "blockmm: error: " + h5 + ": ", {"m = " + std::to_string(m), "46340"}));
    for (const char* name : {"blockmm-info", "blockmm-cmp"}) {
      std::vector<std::string> argv = {tool(name), bin};
      if (std::string(name) == "blockmm-cmp") argv.push_back(bin);
      const RunResult info = run_process(argv);
      EXPECT_EQ(info.exit_code, 3) << info.describe();  // bad input, for blockmm-cmp too
      EXPECT_NE(info.err.find("46340"), std::string::npos) << info.describe();
    }
    const RunResult gen = run_process({tool("blockmm-gen"), out_dir + "/G.bin", "--n", std::to_string(m), "--m",
                                       std::to_string(m), "--k", "0", "-q"});
    EXPECT_EQ(gen.exit_code, 2) << gen.describe();
    EXPECT_TRUE(one_error_line(gen, "blockmm-gen: error: ", {"--m " + std::to_string(m), "46340"}));
    EXPECT_TRUE(list_dir(out_dir).empty());
  }
  // m = 46340 is the largest accepted: an empty product of such files is a header-only file.
  const std::string edge = dir / "edge.bin";
  write_bytes(edge, encode_with_header(46340, 46340, 0, {}));
  const RunResult run = run_blockmm({edge, edge, out_dir + "/C.bin", "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(read_bytes(out_dir + "/C.bin"), encode_with_header(46340, 46340, 0, {}));
}

}  // namespace
}  // namespace blockmm::e2e
