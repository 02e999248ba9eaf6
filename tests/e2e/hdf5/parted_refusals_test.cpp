// blockmm's readers take exactly their own parted layout (docs/output.md, label "hdf5"). Parted
// files are crafted here with the HDF5 C API (never src/io): a valid one (uint16 values, so that
// blockmm itself reads it as an input) gives the product of the same matrix in one file; every
// departure is refused with exit 3 and one message before anything is read through it, by
// blockmm (as an input) and blockmm-convert alike: virtual datasets naming files in other
// folders, absolute paths, another output's parts, a symbolic link, a FIFO or a missing file in a
// part's place, parts whose datasets are virtual, external, links, of another shape, mappings
// out of order or with gaps, no record of the parts, and parts that are not what the record says.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::e2e {
namespace {

struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

std::string tool(const char* name) {
  const std::string bin = blockmm_bin();
  return bin.substr(0, bin.rfind('/') + 1) + name;
}

void string_attribute(hid_t file, const char* name, const std::string& value) {
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, H5T_VARIABLE);
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attribute{H5Acreate2(file, name, type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  const char* text = value.c_str();
  ASSERT_GE(H5Awrite(attribute.id, type.id, &text), 0) << name;
}

void int_attribute(hid_t file, const char* name, std::int64_t value) {
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attribute{H5Acreate2(file, name, H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  ASSERT_GE(H5Awrite(attribute.id, H5T_NATIVE_INT64, &value), 0) << name;
}

void dataset(hid_t file, const char* name, hid_t file_type, hid_t memory_type, const std::vector<hsize_t>& dims,
             const void* values, hid_t plist = H5P_DEFAULT) {
  Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Handle set{H5Dcreate2(file, name, file_type, space.id, H5P_DEFAULT, plist, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(set.id, 0) << name;
  if (values != nullptr) {
    ASSERT_GE(H5Dwrite(set.id, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << name;
  }
}

// A parted BSR matrix of uint16 values, as blockmm lays one out (main file C.h5 with its record
// of the parts in a 512-byte user block, /indptr, virtual /indices and /data over part files
// "C.h5.part-<generation>-<kkkk>" beside it), with the hooks that make each defect.
struct PartedCraft {
  std::string dir;
  std::string base = "C.h5";
  std::string generation = "0a1b2c3d";
  InputRecords sorted;            // the matrix, its records in (i, j) order
  std::vector<std::int64_t> cuts;  // block boundaries of the parts: 0, ..., nnzb
  // The defects.
  std::function<std::string(int)> source_file;       // the name mapping k names (default: part k's)
  std::function<std::int64_t(int)> mapped_first;     // the first block mapping k covers (default: cuts[k])
  bool user_block = true;
  std::string part_generation;                       // the parts' attribute (default: generation)
  int odd_part = -1;                                 // part whose /data is written the odd way below
  enum class Odd { none, virtual_data, external_data, soft_link, wrong_shape } odd = Odd::none;

  std::string part(int k) const {
    char name[16];
    std::snprintf(name, sizeof name, "%04d", k);
    return base + ".part-" + generation + "-" + name;
  }
  int parts() const { return static_cast<int>(cuts.size()) - 1; }
  std::int64_t nnzb() const { return sorted.size(); }
  std::int32_t m() const { return sorted.shape.m; }
};

void write_part(const PartedCraft& c, int k) {
  const std::string path = c.dir + "/" + c.part(k);
  const std::int64_t first = c.cuts[k], blocks = c.cuts[k + 1] - c.cuts[k];
  const auto m = static_cast<hsize_t>(c.m());
  std::vector<std::int32_t> indices;
  std::vector<std::uint16_t> values;
  for (std::int64_t b = first; b < first + blocks; ++b) {
    indices.push_back(record_col(c.sorted.record(b)));
    values.insert(values.end(), c.sorted.values(b), c.sorted.values(b) + m * m);
  }
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0) << path;
  string_attribute(file.id, "format", "blockmm-bsr-part");
  int_attribute(file.id, "version", 1);
  string_attribute(file.id, "generation", c.part_generation.empty() ? c.generation : c.part_generation);
  int_attribute(file.id, "part", k);
  int_attribute(file.id, "parts", c.parts());
  int_attribute(file.id, "first", first);
  int_attribute(file.id, "nnzb", blocks);
  int_attribute(file.id, "m", c.m());
  dataset(file.id, "indices", H5T_STD_I32LE, H5T_NATIVE_INT32, {static_cast<hsize_t>(blocks)}, indices.data());
  const std::vector<hsize_t> dims = {static_cast<hsize_t>(blocks), m, m};
  if (k != c.odd_part || c.odd == PartedCraft::Odd::none) {
    dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, values.data());
    return;
  }
  switch (c.odd) {
    case PartedCraft::Odd::virtual_data: {  // its values in yet another file
      const std::string other = c.dir + "/values.h5";
      {
        Handle o{H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
        dataset(o.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, values.data());
      }
      Handle space{H5Screate_simple(3, dims.data(), nullptr), H5Sclose};
      Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
      ASSERT_GE(H5Pset_virtual(plist.id, space.id, "values.h5", "/data", space.id), 0);
      dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, nullptr, plist.id);
      break;
    }
    case PartedCraft::Odd::external_data: {
      Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
      ASSERT_GE(H5Pset_external(plist.id, (c.dir + "/values.raw").c_str(), 0, 2 * values.size()), 0);
      dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, values.data(), plist.id);
      break;
    }
    case PartedCraft::Odd::soft_link:
      dataset(file.id, "values", H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, values.data());
      ASSERT_GE(H5Lcreate_soft("/values", file.id, "data", H5P_DEFAULT, H5P_DEFAULT), 0);
      break;
    case PartedCraft::Odd::wrong_shape: {
      const std::vector<hsize_t> other = {static_cast<hsize_t>(blocks), m * m};
      dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT16, other, values.data());
      break;
    }
    case PartedCraft::Odd::none: break;
  }
}

void write_parted(const PartedCraft& c) {
  for (int k = 0; k < c.parts(); ++k) write_part(c, k);
  const std::string path = c.dir + "/" + c.base;
  const std::int32_t n = c.sorted.shape.n, m = c.m(), p = n / m;
  std::vector<std::int64_t> indptr(static_cast<std::size_t>(p) + 1, 0);
  for (std::int64_t b = 0; b < c.nnzb(); ++b) ++indptr[static_cast<std::size_t>(record_row(c.sorted.record(b))) + 1];
  std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
  {
    Handle create{H5Pcreate(H5P_FILE_CREATE), H5Pclose};
    if (c.user_block) {
      ASSERT_GE(H5Pset_userblock(create.id, 512), 0);
    }
    Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, create.id, H5P_DEFAULT), H5Fclose};
    ASSERT_GE(file.id, 0) << path;
    string_attribute(file.id, "format", "blockmm-bsr");
    for (const auto& [name, value] : std::vector<std::pair<const char*, std::int64_t>>{
             {"version", 1}, {"n", n}, {"m", m}, {"nnzb", c.nnzb()}, {"parts", c.parts()}})
      int_attribute(file.id, name, value);
    dataset(file.id, "indptr", H5T_STD_I64LE, H5T_NATIVE_INT64, {static_cast<hsize_t>(p) + 1}, indptr.data());
    for (const bool values : {false, true}) {
      std::vector<hsize_t> dims = {static_cast<hsize_t>(c.nnzb())};
      if (values) dims.insert(dims.end(), {static_cast<hsize_t>(m), static_cast<hsize_t>(m)});
      Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
      Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
      for (int k = 0; k < c.parts(); ++k) {
        const std::int64_t first = c.mapped_first ? c.mapped_first(k) : c.cuts[k];
        std::vector<hsize_t> start(dims.size(), 0), count = dims;
        start[0] = static_cast<hsize_t>(first);
        count[0] = static_cast<hsize_t>(c.cuts[k + 1] - c.cuts[k]);
        Handle source{H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose};
        ASSERT_GE(H5Sselect_hyperslab(space.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), 0);
        const std::string name = c.source_file ? c.source_file(k) : c.part(k);
        ASSERT_GE(H5Pset_virtual(plist.id, space.id, name.c_str(), values ? "/data" : "/indices", source.id), 0);
      }
      H5Sselect_all(space.id);
      dataset(file.id, values ? "data" : "indices", values ? H5T_STD_U16LE : H5T_STD_I32LE, H5T_NATIVE_INT32, dims,
              nullptr, plist.id);
    }
  }
  if (c.user_block) {
    std::string record = "blockmm-parts generation=" + c.generation + " parts=" + std::to_string(c.parts()) + "\n";
    record.resize(512, '\0');
    std::vector<std::byte> bytes = read_bytes(path);
    std::memcpy(bytes.data(), record.data(), record.size());
    write_bytes(path, bytes);
  }
}

class PartedRefusals : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-parted-refusals"};
  std::string out_dir = scratch.subdir("out");
  InputRecords a, b;
  std::string pb = scratch / "B.bin";

  void SetUp() override {
    std::mt19937_64 rng(4104);
    testing::RandomSpec spec;
    spec.n = 120;
    spec.m = 4;
    spec.density = 0.3;
    a = testing::random_blocks(spec, rng);
    b = testing::random_blocks(spec, rng);
    write_bytes(pb, encode(b));
  }

  // A valid craft of A in `dir` (three parts of uneven sizes).
  PartedCraft craft(const std::string& dir) const {
    PartedCraft c;
    c.dir = dir;
    c.sorted.shape = a.shape;
    std::vector<std::int64_t> order(static_cast<std::size_t>(a.size()));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
      return std::make_pair(record_row(a.record(x)), record_col(a.record(x))) <
             std::make_pair(record_row(a.record(y)), record_col(a.record(y)));
    });
    for (std::int64_t q : order) c.sorted.bytes.insert(c.sorted.bytes.end(), a.record(q), a.record(q) + a.stride());
    c.cuts = {0, c.nnzb() / 5, c.nnzb() / 2, c.nnzb()};
    return c;
  }
};

TEST_F(PartedRefusals, OwnLayoutIsReadAsTheMatrixItHolds) {
  const std::string dir = scratch.subdir("good");
  PartedCraft c = craft(dir);
  write_parted(c);
  const std::string single = scratch / "A.bin";
  write_bytes(single, encode(a));
  const RunResult parted = run_blockmm({"-q", dir + "/C.h5", pb, out_dir + "/C1.bin"});
  ASSERT_EQ(parted.exit_code, 0) << parted.describe();
  ASSERT_EQ(run_blockmm({"-q", single, pb, out_dir + "/C2.bin"}).exit_code, 0);
  EXPECT_TRUE(read_bytes(out_dir + "/C1.bin") == read_bytes(out_dir + "/C2.bin"));
  // Read from another working directory by a relative name: the parts are found beside it.
  RunOptions elsewhere;
  elsewhere.cwd = scratch.subdir("elsewhere");
  const RunResult relative = run_process({tool("blockmm-convert"), "../good/C.h5", "../out/A.bin"}, elsewhere);
  ASSERT_EQ(relative.exit_code, 0) << relative.describe();
  EXPECT_TRUE(read_bytes(out_dir + "/A.bin") == encode(c.sorted));
}

TEST_F(PartedRefusals, EveryOtherLayoutIsRefusedBeforeItIsRead) {
  struct Case {
    std::string name;
    std::function<void(PartedCraft&, const std::string& dir)> make;  // defects before writing
    std::function<void(const std::string& dir)> after;                // defects after writing
    std::string fragment;
    std::string file = "C.h5";  // the main file given to the tools
  };
  const std::vector<Case> cases = {
      {"parent folder", [](PartedCraft& c, const std::string&) { c.source_file = [&c](int k) { return "../" + c.part(k); }; },
       nullptr, "names the file '../C.h5.part-0a1b2c3d-0000', which is not part 0 of C.h5"},
      {"absolute path", [](PartedCraft& c, const std::string&) { c.source_file = [](int) { return "/etc/passwd"; }; },
       nullptr, "names the file '/etc/passwd'"},
      {"another output's part",
       [](PartedCraft& c, const std::string&) {
         c.source_file = [&c](int k) { return "D.h5" + c.part(k).substr(4); };
       },
       nullptr, "names the file 'D.h5.part-0a1b2c3d-0000'"},
      {"main file renamed", nullptr,
       [](const std::string& dir) { ASSERT_EQ(::rename((dir + "/C.h5").c_str(), (dir + "/E.h5").c_str()), 0); },
       "which is not part 0 of E.h5", "E.h5"},
      {"another generation",
       [](PartedCraft& c, const std::string&) {
         c.source_file = [&c](int k) {
           std::string name = c.part(k);
           return name.replace(name.find(c.generation), 8, "99999999");
         };
       },
       nullptr, "names the file 'C.h5.part-99999999-0000'"},
      {"out of order",
       [](PartedCraft& c, const std::string&) { c.source_file = [&c](int k) { return c.part(k == 0 ? 1 : k == 1 ? 0 : k); }; },
       nullptr, "which is not part 0 of C.h5"},
      {"a gap", [](PartedCraft& c, const std::string&) { c.mapped_first = [&c](int k) { return c.cuts[k] + (k == 1); }; },
       nullptr, "holds whole blocks from block"},
      {"symbolic link", nullptr,
       [](const std::string& dir) {
         const std::string part = dir + "/C.h5.part-0a1b2c3d-0001";
         ASSERT_EQ(::rename(part.c_str(), (dir + "/copy").c_str()), 0);
         ASSERT_EQ(::symlink("copy", part.c_str()), 0);
       },
       "part file C.h5.part-0a1b2c3d-0001 is a symbolic link"},
      {"FIFO", nullptr,
       [](const std::string& dir) {
         const std::string part = dir + "/C.h5.part-0a1b2c3d-0002";
         ASSERT_EQ(::unlink(part.c_str()), 0);
         ASSERT_EQ(::mkfifo(part.c_str(), 0600), 0);
       },
       "part file C.h5.part-0a1b2c3d-0002 is not a regular file"},
      {"missing", nullptr, [](const std::string& dir) { ASSERT_EQ(::unlink((dir + "/C.h5.part-0a1b2c3d-0001").c_str()), 0); },
       "part file C.h5.part-0a1b2c3d-0001 is missing"},
      {"no record", [](PartedCraft& c, const std::string&) { c.user_block = false; }, nullptr, "no blockmm part record"},
      {"part of another generation", [](PartedCraft& c, const std::string&) { c.part_generation = "ffffffff"; }, nullptr,
       "root attribute generation = \"ffffffff\""},
      {"virtual part",
       [](PartedCraft& c, const std::string&) {
         c.odd_part = 1;
         c.odd = PartedCraft::Odd::virtual_data;
       },
       nullptr, "/data is a virtual dataset"},
      {"external part",
       [](PartedCraft& c, const std::string&) {
         c.odd_part = 2;
         c.odd = PartedCraft::Odd::external_data;
       },
       nullptr, "/data keeps its values in an external file"},
      {"soft link in a part",
       [](PartedCraft& c, const std::string&) {
         c.odd_part = 0;
         c.odd = PartedCraft::Odd::soft_link;
       },
       nullptr, "/data is a soft link"},
      {"part of another shape",
       [](PartedCraft& c, const std::string&) {
         c.odd_part = 1;
         c.odd = PartedCraft::Odd::wrong_shape;
       },
       nullptr, "/data has shape"},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.name);
    const std::string dir = scratch.subdir("case-" + std::to_string(&t - cases.data()));
    PartedCraft c = craft(dir);
    if (t.make) t.make(c, dir);
    write_parted(c);
    if (t.after) t.after(dir);
    const std::string path = dir + "/" + t.file;
    RunOptions options;
    options.timeout_seconds = 30;  // a FIFO that blocks is a failure, not a stuck suite
    const std::vector<std::vector<std::string>> commands = {
        {blockmm_bin(), "-q", path, pb, out_dir + "/C.bin"}, {tool("blockmm-convert"), path, out_dir + "/D.bin"}};
    for (const std::vector<std::string>& argv : commands) {
      const RunResult run = run_process(argv, options);
      const std::string prefix = argv[0].substr(argv[0].rfind('/') + 1) + ": error: " + path + ": ";
      EXPECT_EQ(run.exit_code, 3) << run.describe();
      const std::vector<std::string> lines = split_lines(run.err);
      EXPECT_EQ(lines.size(), 1u) << run.describe();
      EXPECT_TRUE(!lines.empty() && lines[0].rfind(prefix, 0) == 0 && lines[0].find(t.fragment) != std::string::npos)
          << "expected '" << prefix << "...' holding '" << t.fragment << "'\n" << run.describe();
      EXPECT_TRUE(list_dir(out_dir).empty()) << "an output was written";
    }
  }
}

}  // namespace
}  // namespace blockmm::e2e
