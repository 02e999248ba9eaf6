// Parted HDF5 outputs end to end (label "hdf5", docs/output.md): blockmm --parts with the cpu
// backend, in one process and under mpiexec -n 1..4 (rows shared between ranks included), gives
// the single-file product's matrix through HDF5's own virtual datasets, blockmm-convert joins it
// into the single file byte for byte, and blockmm-cmp reads it; a run that replaces a parted
// output removes exactly that output's parts; a failed run leaves an existing parted output and
// its parts as they were. blockmm's reader takes exactly its own layout: crafted files (the HDF5
// C API here, never src/io) whose virtual datasets name files outside the folder, links, another
// output's parts, parts holding virtual or external storage, or a layout that does not add up
// are refused with exit 3 before anything is read through them.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <regex>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

#ifndef BLOCKMM_MPIEXEC_PATH
#define BLOCKMM_MPIEXEC_PATH "mpiexec"
#endif

std::string tool(const char* name) {
  const std::string bin = blockmm_bin();
  return bin.substr(0, bin.rfind('/') + 1) + name;
}

RunResult run_tool(const char* name, const std::vector<std::string>& args, RunOptions options = {}) {
  std::vector<std::string> argv{tool(name)};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, options);
}

RunResult run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{env_or("BLOCKMM_MPIEXEC", BLOCKMM_MPIEXEC_PATH), "-n", std::to_string(ranks),
                                "--oversubscribe", blockmm_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options;
  options.set_env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  options.set_env.insert(options.set_env.end(), env.begin(), env.end());
  return run_process(argv, options);
}

::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// The three arrays as libhdf5 itself reads them (virtual datasets resolved by libhdf5), as
// bytes of their native types, and the root attributes.
struct Arrays {
  std::vector<std::int64_t> indptr;
  std::vector<std::int32_t> indices;
  std::vector<std::uint32_t> data;
  std::vector<std::int64_t> attributes;  // n, m, nnzb
  bool operator==(const Arrays& o) const {
    return indptr == o.indptr && indices == o.indices && data == o.data && attributes == o.attributes;
  }
};

template <typename T>
void read_all(hid_t file, const char* name, hid_t type, std::vector<T>& out) {
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(set.id, 0) << name;
  Handle space{H5Dget_space(set.id), H5Sclose};
  out.resize(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id)));
  if (!out.empty()) {
    ASSERT_GE(H5Dread(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << name;
  }
}

Arrays read_arrays(const std::string& path) {
  Arrays a;
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  EXPECT_GE(file.id, 0) << path;
  if (file.id < 0) return a;
  for (const char* name : {"n", "m", "nnzb"}) {
    Handle attribute{H5Aopen(file.id, name, H5P_DEFAULT), H5Aclose};
    std::int64_t v = -1;
    EXPECT_GE(H5Aread(attribute.id, H5T_NATIVE_INT64, &v), 0) << name;
    a.attributes.push_back(v);
  }
  read_all(file.id, "indptr", H5T_NATIVE_INT64, a.indptr);
  read_all(file.id, "indices", H5T_NATIVE_INT32, a.indices);
  read_all(file.id, "data", H5T_NATIVE_UINT32, a.data);
  return a;
}

std::int64_t int_attribute(const std::string& path, const char* name) {
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  Handle attribute{H5Aopen(file.id, name, H5P_DEFAULT), H5Aclose};
  std::int64_t v = -1;
  if (attribute.id >= 0) H5Aread(attribute.id, H5T_NATIVE_INT64, &v);
  return v;
}

// The part files beside `main` (names OUT.part-<8 hex>-<4 digits>).
std::vector<std::string> parts_in(const std::string& dir, const std::string& base) {
  const std::regex pattern(std::regex_replace(base, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                           R"(\.part-[0-9a-f]{8}-[0-9]{4})");
  std::vector<std::string> found;
  for (const std::string& name : list_dir(dir))
    if (std::regex_match(name, pattern)) found.push_back(name);
  return found;
}

class Parted : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-parted"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");

  std::string put(const std::string& name, const InputRecords& records) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, encode(records));
    return path;
  }
};

// ---------------------------------------------------------------------------------------------
// Written by blockmm

TEST_F(Parted, PartedOutputIsTheSingleFileProduct) {
  std::mt19937_64 rng(4101);
  testing::RandomSpec spec;
  spec.n = 600;
  spec.m = 6;
  spec.density = 0.3;
  spec.empty_row_fraction = 0.2;
  const InputRecords a = testing::random_blocks(spec, rng);
  const InputRecords b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a), pb = put("B.bin", b);
  const std::string single = in_dir + "/single.h5";
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "off", pa, pb, single})));
  const Arrays expected = read_arrays(single);
  OutputRecords oracle = sparse_oracle(a, b);
  ASSERT_EQ(expected.attributes[2], oracle.size()) << "the single-file product is not the oracle's";
  const std::string out = out_dir + "/C.h5", joined = in_dir + "/joined.h5";

  struct Run {
    int ranks;  // 0: a plain process
    const char* parts;
    std::vector<std::string> env;
  };
  const std::vector<Run> runs = {{0, "2", {}}, {0, "7", {}}, {1, "3", {}}, {2, "4", {}}, {3, "5", {}},
                                 {4, "8", {}}, {2, "4", {"BLOCKMM_SHARE_ROWS=give"}}, {3, "3", {"BLOCKMM_SHARE_ROWS=give"}}};
  for (const Run& r : runs) {
    SCOPED_TRACE(std::to_string(r.ranks) + " ranks, --parts " + r.parts + (r.env.empty() ? "" : ", " + r.env[0]));
    const std::vector<std::string> args = {"-q", "--threads", "1", "--parts", r.parts, pa, pb, out};
    RunOptions options;
    options.set_env = r.env;
    ASSERT_TRUE(succeeded(r.ranks == 0 ? run_blockmm(args, options) : run_mpi(r.ranks, args, r.env)));
    const std::vector<std::string> parts = parts_in(out_dir, "C.h5");
    const int ranks = std::max(1, r.ranks);
    const int per_rank = (std::atoi(r.parts) + ranks - 1) / ranks;
    EXPECT_EQ(static_cast<int>(parts.size()), per_rank * ranks) << "every rank writes its share of the parts";
    EXPECT_EQ(int_attribute(out, "parts"), static_cast<std::int64_t>(parts.size()));
    EXPECT_EQ(list_dir(out_dir).size(), parts.size() + 1) << "a temporary file or an old part was left";
    EXPECT_TRUE(read_arrays(out) == expected) << "libhdf5 reads another matrix through the virtual datasets";
    ASSERT_TRUE(succeeded(run_tool("blockmm-convert", {out, joined})));
    EXPECT_TRUE(read_bytes(joined) == read_bytes(single)) << "the joined file is not the single-file product, byte for byte";
    EXPECT_TRUE(succeeded(run_tool("blockmm-cmp", {"--strict", single, out})));
    EXPECT_TRUE(succeeded(run_tool("blockmm-info", {out})));
  }
  // --parts 1 is one file, the single-file product itself.
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "1", pa, pb, out})));
  EXPECT_TRUE(read_bytes(out) == read_bytes(single));
  EXPECT_EQ(list_dir(out_dir), std::vector<std::string>{"C.h5"}) << "the replaced output's parts were not removed";
}

// A run replacing a parted output removes that output's parts (whatever their number) and no
// other file: not another generation's part-named file, not a link named as one of its parts,
// not another output's parts. Permissions: the parts take the main file's.
TEST_F(Parted, ReplacingAPartedOutputRemovesExactlyItsParts) {
  std::mt19937_64 rng(4102);
  testing::RandomSpec spec;
  spec.n = 256;
  spec.m = 4;
  spec.density = 0.4;
  const InputRecords a = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a);
  const std::string out = out_dir + "/C.h5";
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "4", pa, pa, out})));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "2", pa, pa, out_dir + "/D.h5"})));
  const std::vector<std::string> first = parts_in(out_dir, "C.h5");
  ASSERT_EQ(first.size(), 4u);
  // Someone else's files named like parts of C.h5: another generation, and a link in place of
  // one of C.h5's own parts (its target must survive too).
  const std::string stranger = out_dir + "/C.h5.part-ffffffff-0000";
  write_text(stranger, "not blockmm's\n");
  write_text(in_dir + "/target", "a link's target\n");
  const std::string linked = out_dir + "/" + first[3];
  ASSERT_EQ(::unlink(linked.c_str()), 0);
  ASSERT_EQ(::symlink((in_dir + "/target").c_str(), linked.c_str()), 0);
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);

  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "2", pa, pa, out})));
  std::vector<std::string> now = parts_in(out_dir, "C.h5");
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_EQ(std::count(now.begin(), now.end(), first[k]), 0) << first[k] << " of the replaced output was left";
  EXPECT_TRUE(path_exists(stranger));
  EXPECT_TRUE(path_exists(linked)) << "a link named as a part was removed";
  EXPECT_TRUE(path_exists(in_dir + "/target"));
  EXPECT_EQ(parts_in(out_dir, "D.h5").size(), 2u) << "another output's parts were touched";
  std::vector<std::string> fresh;
  for (const std::string& name : now)
    if (name != first[3] && name != "C.h5.part-ffffffff-0000") fresh.push_back(name);
  ASSERT_EQ(fresh.size(), 2u);
  for (const std::string& name : fresh) {
    struct stat st {};
    ASSERT_EQ(::stat((out_dir + "/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u) << name << " has not the main file's permissions";
  }
  EXPECT_TRUE(succeeded(run_tool("blockmm-cmp", {"--strict", out_dir + "/D.h5", out})));
  // A binary output over a parted one takes its parts with it as well.
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", "bin", pa, pa, out})));
  for (const std::string& name : fresh) EXPECT_FALSE(path_exists(out_dir + "/" + name)) << name;
}

// A parted output read as an input: no tool writes over one of its part files, whatever name it
// is given (the one tab completion offers, a link to it), nor over the main file (joining it in
// place is refused too: join into another name). blockmm's output and --stats-file,
// blockmm-convert's output: exit 2, one line naming the part, the parted file whole (issue 52,
// item 3: the part was replaced by the output and the input destroyed).
TEST_F(Parted, NoToolWritesOverItsPartedInput) {
  std::mt19937_64 rng(4104);
  testing::RandomSpec spec;
  spec.n = 64;
  spec.m = 4;
  spec.density = 0.4;
  const std::string pa = put("A.bin", testing::random_blocks(spec, rng));
  const std::string main = out_dir + "/C.h5";
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "2", pa, pa, main})));
  const std::vector<std::string> parts = parts_in(out_dir, "C.h5");
  ASSERT_EQ(parts.size(), 2u);
  const std::string link = in_dir + "/part.link";
  ASSERT_EQ(::symlink((out_dir + "/" + parts[0]).c_str(), link.c_str()), 0);
  std::vector<std::vector<std::byte>> before;
  for (const std::string& name : list_dir(out_dir)) before.push_back(read_bytes(out_dir + "/" + name));
  const std::string other = scratch.subdir("other") + "/X.bin";
  const struct {
    const char* tool;
    std::vector<std::string> args;
    std::string named;  // the file the message starts with
    const char* says;
  } cases[] = {
      {"blockmm-convert", {main, out_dir + "/" + parts[0]}, out_dir + "/" + parts[0], "the part file " },
      {"blockmm-convert", {main, link}, link, "the part file "},
      {"blockmm-convert", {main, main}, main, "is the input"},
      {"blockmm", {"-q", main, pa, out_dir + "/" + parts[1]}, out_dir + "/" + parts[1], "the part file "},
      {"blockmm", {"-q", pa, main, link}, link, "the part file "},
      {"blockmm", {"-q", main, pa, other, "--stats-file", out_dir + "/" + parts[1]}, out_dir + "/" + parts[1],
       "the --stats-file is the part file "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.tool) + " ... " + c.named);
    const RunResult run = run_tool(c.tool, c.args);
    EXPECT_EQ(run.exit_code, 2) << run.describe();
    const std::vector<std::string> lines = split_lines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.describe();
    EXPECT_EQ(lines[0].rfind(std::string(c.tool) + ": error: " + c.named + ": ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(c.says), std::string::npos) << lines[0];
  }
  std::vector<std::vector<std::byte>> after;
  for (const std::string& name : list_dir(out_dir)) after.push_back(read_bytes(out_dir + "/" + name));
  EXPECT_TRUE(after == before) << "the parted input changed";
  EXPECT_FALSE(path_exists(other));
  EXPECT_TRUE(succeeded(run_tool("blockmm-info", {main})));
}

// Every way a run can fail after its parts exist: the existing parted output stays whole.
TEST_F(Parted, FailedRunLeavesTheExistingPartedOutput) {
  std::mt19937_64 rng(4103);
  testing::RandomSpec spec;
  spec.n = 400;
  spec.m = 8;
  spec.density = 0.3;
  const InputRecords a = testing::random_blocks(spec, rng);  // a product of about 640 kB
  const std::string pa = put("A.bin", a);
  const std::string out = out_dir + "/C.h5";
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--parts", "3", pa, pa, out})));
  std::vector<std::pair<std::string, std::vector<std::byte>>> before;
  for (const std::string& name : list_dir(out_dir)) before.emplace_back(name, read_bytes(out_dir + "/" + name));
  const auto unchanged = [&] {
    std::vector<std::pair<std::string, std::vector<std::byte>>> now;
    for (const std::string& name : list_dir(out_dir)) now.emplace_back(name, read_bytes(out_dir + "/" + name));
    return now == before;
  };
  for (const int blocks : {1, 16, 200}) {  // the main file's metadata, then the parts' metadata and storage
    SCOPED_TRACE(std::to_string(blocks) + " blocks of 512 bytes");
    const RunResult run = run_process({"/bin/sh", "-c", "trap '' XFSZ; ulimit -f " + std::to_string(blocks) +
                                                            "; exec \"$@\"", "sh", blockmm_bin(), "-q", "--parts", "5",
                                       pa, pa, out});
    EXPECT_EQ(run.exit_code, 4) << run.describe();
    EXPECT_NE(run.err.find("File too large"), std::string::npos) << run.describe();
    EXPECT_TRUE(unchanged()) << "the existing output, its parts or the folder changed";
  }
  // A parted run that fails at its inputs after its output exists (a block given twice, found
  // when the operands are built): the same.
  InputRecords twice = a;
  const std::vector<std::byte> first(a.record(0), a.record(0) + a.stride());
  twice.bytes.insert(twice.bytes.end(), first.begin(), first.end());
  const RunResult duplicate = run_blockmm({"-q", "--parts", "5", pa, put("twice.bin", twice), out});
  EXPECT_EQ(duplicate.exit_code, 3) << duplicate.describe();
  EXPECT_TRUE(unchanged());
  // --parts must be a count or auto/off.
  for (const char* bad : {"0", "-1", "4097", "x", ""}) {
    const RunResult run = run_blockmm({"-q", "--parts", bad, pa, pa, out});
    EXPECT_EQ(run.exit_code, 2) << bad << "\n" << run.describe();
  }
  EXPECT_TRUE(unchanged());
}

}  // namespace
}  // namespace blockmm::e2e
