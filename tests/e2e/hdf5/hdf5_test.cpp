// HDF5 (BSR layout) end to end, label "hdf5": blockmm-convert round trips for inputs and
// products; blockmm's .h5 products against an independent oracle and against its binary
// products; 1..4 MPI ranks giving the same datasets; HDF5 inputs giving the same products as
// binary ones; every malformed-input rule (exit 3, one line, nothing written); failed writes
// leaving no file. HDF5 files are read and crafted here with the HDF5 C API directly, never
// through src/io, so that the checks share no code with what they check.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "support/harness.hpp"
#include "support/random_blocks.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

#ifndef BLOCKMM_MPIEXEC_PATH
#define BLOCKMM_MPIEXEC_PATH "mpiexec"
#endif

// blockmm-convert is built beside blockmm.
std::string convert_bin() {
  const std::string bin = blockmm_bin();
  return env_or("BLOCKMM_CONVERT", bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert");
}

std::string mpiexec_bin() { return env_or("BLOCKMM_MPIEXEC", BLOCKMM_MPIEXEC_PATH); }

// OpenMPI refuses root without these (CI runs as root); harmless otherwise.
RunOptions with_mpi_env() {
  RunOptions options;
  options.set_env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  return options;
}

RunResult run_convert(const std::vector<std::string>& args) {
  std::vector<std::string> argv{convert_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

RunResult run_mpi(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{mpiexec_bin(), "-n", std::to_string(ranks), "--oversubscribe", blockmm_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions options = with_mpi_env();
  options.set_env.insert(options.set_env.end(), env.begin(), env.end());
  return run_process(argv, options);
}

::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

// A failed run: `code`, one stderr line "<tool>: error: <file>: ..." holding `fragment`, and
// `dir` empty (no output, no temporary file). Under mpiexec the launcher adds lines of its own,
// so there the message need only be among them.
::testing::AssertionResult failed_cleanly(const RunResult& run, int code, const std::string& prefix,
                                          const std::string& file, const std::string& fragment, const std::string& dir,
                                          bool one_line = true) {
  auto failure = [&](const std::string& what) { return ::testing::AssertionFailure() << what << "\n" << run.describe(); };
  if (run.exit_code != code) return failure("expected exit code " + std::to_string(code));
  const std::vector<std::string> lines = split_lines(run.err);
  if (one_line && lines.size() != 1) return failure("expected one line on stderr");
  const std::string head = prefix + ": error: " + file + ": ";
  const bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.rfind(head, 0) == 0 && line.find(fragment) != std::string::npos;
  });
  if (!found) return failure("no stderr line starts with '" + head + "' and holds '" + fragment + "'");
  if (!list_dir(dir).empty()) return failure("the output directory is not empty");
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------------
// Independent HDF5 access

struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// A BSR file's contents, values widened to uint32.
struct Bsr {
  std::string format;
  std::map<std::string, std::int64_t> ints;  // version, n, m, nnzb
  std::size_t value_bytes = 0;               // 2 or 4
  std::vector<std::int64_t> indptr;
  std::vector<std::int32_t> indices;
  std::vector<std::uint32_t> data;
  std::vector<hsize_t> data_dims;
  bool operator==(const Bsr& o) const {
    return format == o.format && ints == o.ints && value_bytes == o.value_bytes && indptr == o.indptr &&
           indices == o.indices && data == o.data && data_dims == o.data_dims;
  }
};

template <typename T>
void read_dataset(hid_t file, const char* name, hid_t memory_type, std::vector<T>& out, std::vector<hsize_t>* dims,
                  std::size_t* bytes) {
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(set.id, 0) << name;
  Handle space{H5Dget_space(set.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.id, d.data(), nullptr);
  if (dims != nullptr) *dims = d;
  if (bytes != nullptr) {
    Handle type{H5Dget_type(set.id), H5Tclose};
    *bytes = H5Tget_size(type.id);
  }
  out.resize(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id)));
  if (!out.empty()) {
    ASSERT_GE(H5Dread(set.id, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << name;
  }
}

Bsr read_bsr(const std::string& path) {
  Bsr bsr;
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  EXPECT_GE(file.id, 0) << path;
  if (file.id < 0) return bsr;
  {
    Handle attribute{H5Aopen(file.id, "format", H5P_DEFAULT), H5Aclose};
    Handle type{H5Aget_type(attribute.id), H5Tclose};
    EXPECT_GT(H5Tis_variable_str(type.id), 0);
    char* text = nullptr;
    Handle memory{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(memory.id, H5T_VARIABLE);
    H5Tset_cset(memory.id, H5T_CSET_UTF8);
    EXPECT_GE(H5Aread(attribute.id, memory.id, &text), 0);
    if (text != nullptr) bsr.format = text;
    H5free_memory(text);
  }
  for (const char* name : {"version", "n", "m", "nnzb"}) {
    Handle attribute{H5Aopen(file.id, name, H5P_DEFAULT), H5Aclose};
    Handle type{H5Aget_type(attribute.id), H5Tclose};
    EXPECT_TRUE(H5Tequal(type.id, H5T_STD_I64LE) > 0) << name << " is not int64";
    std::int64_t v = -1;
    EXPECT_GE(H5Aread(attribute.id, H5T_NATIVE_INT64, &v), 0) << name;
    bsr.ints[name] = v;
  }
  std::size_t bytes = 0;
  read_dataset(file.id, "indptr", H5T_NATIVE_INT64, bsr.indptr, nullptr, &bytes);
  EXPECT_EQ(bytes, 8u) << "indptr is not int64";
  read_dataset(file.id, "indices", H5T_NATIVE_INT32, bsr.indices, nullptr, &bytes);
  EXPECT_EQ(bytes, 4u) << "indices is not int32";
  read_dataset(file.id, "data", H5T_NATIVE_UINT32, bsr.data, &bsr.data_dims, &bsr.value_bytes);
  return bsr;
}

// The BSR arrays of `records` (any order), as blockmm must write them.
template <typename Value>
Bsr expected_bsr(const RecordBuffer<Value>& records) {
  const std::int32_t n = records.shape.n;
  const std::int32_t m = records.shape.m;
  const std::int32_t p = n / m;
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
    return std::make_pair(record_row(records.record(x)), record_col(records.record(x))) <
           std::make_pair(record_row(records.record(y)), record_col(records.record(y)));
  });
  Bsr bsr;
  bsr.format = "blockmm-bsr";
  const std::int64_t k = records.size();
  bsr.ints = {{"version", 1}, {"n", n}, {"m", m}, {"nnzb", k}};
  bsr.value_bytes = sizeof(Value);
  bsr.indptr.assign(static_cast<std::size_t>(p) + 1, 0);
  bsr.data_dims = {static_cast<hsize_t>(k), static_cast<hsize_t>(m), static_cast<hsize_t>(m)};
  for (std::int64_t q : order) {
    const std::byte* rec = records.record(q);
    ++bsr.indptr[static_cast<std::size_t>(record_row(rec)) + 1];
    bsr.indices.push_back(record_col(rec));
    for (std::int64_t e = 0; e < std::int64_t{m} * m; ++e) {
      Value v;
      std::memcpy(&v, rec + 8 + sizeof(Value) * e, sizeof v);
      bsr.data.push_back(v);
    }
  }
  for (std::int32_t i = 0; i < p; ++i) bsr.indptr[i + 1] += bsr.indptr[i];
  return bsr;
}

template <typename Value>
RecordBuffer<Value> sorted(const RecordBuffer<Value>& records) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
    return std::make_pair(record_row(records.record(x)), record_col(records.record(x))) <
           std::make_pair(record_row(records.record(y)), record_col(records.record(y)));
  });
  RecordBuffer<Value> out;
  out.shape = records.shape;
  out.bytes.resize(records.bytes.size());
  for (std::size_t q = 0; q < order.size(); ++q)
    std::memcpy(out.record(static_cast<std::int64_t>(q)), records.record(order[q]), static_cast<std::size_t>(records.stride()));
  return out;
}

// A BSR file to craft, defects included. Defaults make a valid input.
struct Craft {
  bool write_format = true;
  std::string format = "blockmm-bsr";
  std::map<std::string, std::int64_t> ints;  // attributes written as int64 scalars
  std::string float_attribute;               // written as a float64 instead
  std::string pair_attribute;                // written as two int64s
  std::vector<std::int64_t> indptr;
  hid_t indptr_type = H5T_STD_I64LE;
  std::vector<hsize_t> indptr_dims;  // empty: from the vector
  std::vector<std::int64_t> indices;
  hid_t indices_type = H5T_STD_I32LE;
  std::vector<hsize_t> indices_dims;
  std::vector<std::uint32_t> data;
  hid_t data_type = H5T_STD_U16LE;
  std::vector<hsize_t> data_dims;
  std::set<std::string> omit;  // datasets left out
  bool data_is_group = false;
  bool chunked_gzip = false;   // how h5py users often store arrays
  hsize_t userblock = 0;       // bytes before the superblock (H5Pset_userblock)
};

Craft craft_from(const InputRecords& records) {
  const Bsr bsr = expected_bsr(records);
  Craft c;
  c.ints = bsr.ints;
  c.indptr = bsr.indptr;
  c.indices.assign(bsr.indices.begin(), bsr.indices.end());
  c.data = bsr.data;
  c.data_dims = bsr.data_dims;
  return c;
}

void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t memory_type, std::vector<hsize_t> dims,
                   const void* values, bool chunked_gzip) {
  Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  hsize_t points = 1;
  for (hsize_t d : dims) points *= d;
  if (chunked_gzip && points > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], 3));  // small chunks: several per dataset
    H5Pset_chunk(plist.id, static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(plist.id, 4);
  }
  Handle set{H5Dcreate2(file, name, file_type, space.id, H5P_DEFAULT, plist.id, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(set.id, 0) << name;
  if (points > 0) {
    ASSERT_GE(H5Dwrite(set.id, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << name;
  }
}

void write_craft(const std::string& path, Craft c) {
  Handle create{H5Pcreate(H5P_FILE_CREATE), H5Pclose};
  if (c.userblock > 0) {
    ASSERT_GE(H5Pset_userblock(create.id, c.userblock), 0);
  }
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, create.id, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0) << path;
  if (c.write_format) {
    Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(type.id, c.format.size());  // fixed-length and NUL-padded, as h5py stores numpy bytes
    H5Tset_strpad(type.id, H5T_STR_NULLPAD);
    Handle space{H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, "format", type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
    ASSERT_GE(H5Awrite(attribute.id, type.id, c.format.data()), 0);
  }
  for (const auto& [name, value] : c.ints) {
    const bool as_float = name == c.float_attribute;
    const bool as_pair = name == c.pair_attribute;
    const hsize_t two = 2;
    Handle space{as_pair ? H5Screate_simple(1, &two, nullptr) : H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, name.c_str(), as_float ? H5T_IEEE_F64LE : H5T_STD_I64LE, space.id,
                                H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose};
    const double real = static_cast<double>(value);
    const std::int64_t pair[2] = {value, value};
    ASSERT_GE(H5Awrite(attribute.id, as_float ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64,
                       as_float ? static_cast<const void*>(&real) : static_cast<const void*>(pair)),
              0);
  }
  auto dims_or = [](const std::vector<hsize_t>& dims, std::size_t size) {
    return dims.empty() ? std::vector<hsize_t>{static_cast<hsize_t>(size)} : dims;
  };
  auto fit = [](auto& values, const std::vector<hsize_t>& dims) {
    hsize_t points = 1;
    for (hsize_t d : dims) points *= d;
    values.resize(static_cast<std::size_t>(points));
  };
  if (!c.omit.count("indptr")) {
    const auto dims = dims_or(c.indptr_dims, c.indptr.size());
    fit(c.indptr, dims);
    write_dataset(file.id, "indptr", c.indptr_type, H5T_NATIVE_INT64, dims, c.indptr.data(), c.chunked_gzip);
  }
  if (!c.omit.count("indices")) {
    const auto dims = dims_or(c.indices_dims, c.indices.size());
    fit(c.indices, dims);
    write_dataset(file.id, "indices", c.indices_type, H5T_NATIVE_INT64, dims, c.indices.data(), c.chunked_gzip);
  }
  if (c.data_is_group) {
    Handle group{H5Gcreate2(file.id, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
    ASSERT_GE(group.id, 0);
  } else if (!c.omit.count("data")) {
    fit(c.data, c.data_dims);
    write_dataset(file.id, "data", c.data_type, H5T_NATIVE_UINT32, c.data_dims, c.data.data(), c.chunked_gzip);
  }
}

// ---------------------------------------------------------------------------------------------
// Random matrices

testing::RandomSpec spec_of(std::int32_t n, std::int32_t m, double density, double empty_rows = 0.0) {
  testing::RandomSpec s;
  s.n = n;
  s.m = m;
  s.density = density;
  s.empty_row_fraction = empty_rows;
  return s;
}

// The named awkward shapes first (m = 1, odd m, k = 0, empty rows), then random ones.
std::vector<testing::RandomSpec> specs(std::mt19937_64& rng, int random_count) {
  std::vector<testing::RandomSpec> out = {
      spec_of(7, 1, 0.3),        spec_of(15, 3, 0.4, 0.3), spec_of(25, 5, 0.5),      spec_of(16, 4, 0.0),
      spec_of(40, 4, 0.2, 0.5),  spec_of(9, 9, 1.0),       spec_of(34, 17, 0.75),    spec_of(64, 8, 0.1, 0.2),
  };
  for (int q = 0; q < random_count; ++q) out.push_back(testing::random_spec(rng, 20));
  return out;
}

class Hdf5 : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-hdf5"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");
  std::string work = scratch.subdir("work");

  template <typename Value>
  std::string put(const std::string& name, const RecordBuffer<Value>& records) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, encode(records));
    return path;
  }
};

// ---------------------------------------------------------------------------------------------
// blockmm-convert round trips

template <typename Value>
void round_trip(const RecordBuffer<Value>& records, const std::string& dir, const std::string& tag) {
  SCOPED_TRACE(tag + ": n = " + std::to_string(records.shape.n) + ", m = " + std::to_string(records.shape.m) +
               ", k = " + std::to_string(records.size()));
  const std::string bin = dir + "/" + tag + ".bin";
  const std::string h5 = dir + "/" + tag + ".h5";
  const std::string back = dir + "/" + tag + "-back.bin";
  const std::string copy = dir + "/" + tag + "-copy.hdf5";
  write_bytes(bin, encode(records));
  const std::vector<std::string> width = {"--values", sizeof(Value) == 2 ? "u16" : "u32"};  // k = 0 fits both
  std::vector<std::string> args = width;
  args.insert(args.end(), {bin, h5});
  ASSERT_TRUE(succeeded(run_convert(args)));
  const Bsr expected = expected_bsr(records);
  const Bsr got = read_bsr(h5);
  EXPECT_TRUE(got == expected) << "the HDF5 datasets differ from the records";
  ASSERT_TRUE(succeeded(run_convert({h5, back})));
  EXPECT_TRUE(read_bytes(back) == encode(sorted(records))) << "h5 -> bin is not the sorted binary file";
  ASSERT_TRUE(succeeded(run_convert({"--to", "h5", h5, copy})));  // h5 -> h5 keeps the contents
  EXPECT_TRUE(read_bsr(copy) == expected);
}

TEST_F(Hdf5, ConvertRoundTripsInputs) {
  std::mt19937_64 rng(11);
  for (testing::RandomSpec spec : specs(rng, 12)) {
    spec.shuffle = (rng() & 1) != 0;
    round_trip(testing::random_blocks(spec, rng), work, "input");
  }
}

TEST_F(Hdf5, ConvertRoundTripsProducts) {
  std::mt19937_64 rng(12);
  for (const testing::RandomSpec& spec : specs(rng, 8)) {
    const InputRecords a = testing::random_blocks(spec, rng);
    const InputRecords b = testing::random_blocks(spec, rng);
    round_trip(sparse_oracle(a, b), work, "product");  // uint32, saturated values included
  }
}

TEST_F(Hdf5, SortedBinaryRoundTripIsByteIdentical) {
  std::mt19937_64 rng(13);
  testing::RandomSpec spec = spec_of(60, 3, 0.3, 0.2);
  spec.shuffle = false;  // random_blocks emits row-major order: a sorted file
  const InputRecords a = testing::random_blocks(spec, rng);
  const std::string bin = put("sorted.bin", a);
  ASSERT_TRUE(succeeded(run_convert({bin, work + "/s.h5"})));
  ASSERT_TRUE(succeeded(run_convert({"--to", "bin", work + "/s.h5", work + "/s.out"})));
  EXPECT_TRUE(read_bytes(bin) == read_bytes(work + "/s.out"));
}

TEST_F(Hdf5, ConvertRejectsDuplicatesAndBadFiles) {
  const InputRecords dup_adjacent = make_records(8, 4, {{0, 1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
                                                        {0, 1, std::vector<std::uint16_t>(16, 2)},
                                                        {1, 0, std::vector<std::uint16_t>(16, 3)}});
  const InputRecords dup_apart = make_records(8, 4, {{1, 1, std::vector<std::uint16_t>(16, 1)},
                                                     {0, 0, std::vector<std::uint16_t>(16, 2)},
                                                     {1, 1, std::vector<std::uint16_t>(16, 3)}});
  EXPECT_TRUE(failed_cleanly(run_convert({put("d1.bin", dup_adjacent), out_dir + "/x.h5"}), 3, "blockmm-convert",
                             in_dir + "/d1.bin", "duplicate block (0, 1) at records 0 and 1", out_dir));
  EXPECT_TRUE(failed_cleanly(run_convert({put("d2.bin", dup_apart), out_dir + "/x.h5"}), 3, "blockmm-convert",
                             in_dir + "/d2.bin", "duplicate block (1, 1) at records 0 and 2", out_dir));
  Craft bad = craft_from(dup_apart);  // unsorted indices inside an HDF5 file
  bad.indices = {0, 1, 0};
  bad.indptr = {0, 1, 3};
  write_craft(in_dir + "/bad.h5", bad);
  EXPECT_TRUE(failed_cleanly(run_convert({in_dir + "/bad.h5", out_dir + "/x.bin"}), 3, "blockmm-convert",
                             in_dir + "/bad.h5", "/indices[2] = 0 (block-row 1) is below", out_dir));
  EXPECT_EQ(run_convert({"--to", "pdf", in_dir + "/bad.h5", out_dir + "/x"}).exit_code, 2);
  EXPECT_TRUE(list_dir(out_dir).empty());
}

// ---------------------------------------------------------------------------------------------
// Products

OutputRecords bsr_records(const Bsr& bsr) {
  OutputRecords out;
  out.shape = {static_cast<std::int32_t>(bsr.ints.at("n")), static_cast<std::int32_t>(bsr.ints.at("m"))};
  const std::int64_t mm = std::int64_t{out.shape.m} * out.shape.m;
  out.bytes.resize(bsr.indices.size() * static_cast<std::size_t>(out.stride()));
  for (std::size_t row = 0; row + 1 < bsr.indptr.size(); ++row)
    for (std::int64_t b = bsr.indptr[row]; b < bsr.indptr[row + 1]; ++b) {
      std::byte* rec = out.record(b);
      set_record_index(rec, static_cast<std::int32_t>(row), bsr.indices[b]);
      std::memcpy(rec + 8, bsr.data.data() + b * mm, static_cast<std::size_t>(4 * mm));
    }
  return out;
}

TEST_F(Hdf5, ProductsMatchOracleAndBinary) {
  std::mt19937_64 rng(21);
  int q = 0;
  for (const testing::RandomSpec& spec : specs(rng, 6)) {
    const InputRecords a = testing::random_blocks(spec, rng);
    const InputRecords b = testing::random_blocks(spec, rng);
    const std::string tag = std::to_string(q++);
    SCOPED_TRACE("case " + tag + ": n = " + std::to_string(spec.n) + ", m = " + std::to_string(spec.m));
    const std::string pa = put("A" + tag + ".bin", a);
    const std::string pb = put("B" + tag + ".bin", b);
    const OutputRecords oracle = sparse_oracle(a, b);
    const std::string backend = q % 2 ? "reference" : "cpu";
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, work + "/C.bin"})));
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, work + "/C.h5"})));
    const Bsr got = read_bsr(work + "/C.h5");
    EXPECT_TRUE(got == expected_bsr(oracle)) << "C.h5 differs from the oracle";
    EXPECT_EQ(got.value_bytes, 4u);
    EXPECT_EQ(bsr_records(got).bytes, oracle.bytes);
    ASSERT_TRUE(succeeded(run_convert({work + "/C.h5", work + "/C-from-h5.bin"})));
    EXPECT_TRUE(read_bytes(work + "/C.bin") == read_bytes(work + "/C-from-h5.bin"));
  }
}

TEST_F(Hdf5, FormatOptionAndExtensions) {
  std::mt19937_64 rng(22);
  const InputRecords a = testing::random_blocks(spec_of(24, 4, 0.4), rng);
  const std::string pa = put("A.bin", a);
  const Bsr expected = expected_bsr(sparse_oracle(a, a));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", "h5", pa, pa, work + "/C.out"})));
  EXPECT_TRUE(read_bsr(work + "/C.out") == expected);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pa, work + "/C.hdf5"})));
  EXPECT_TRUE(read_bsr(work + "/C.hdf5") == expected);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", "bin", pa, pa, work + "/C.h5"})));
  OutputRecords bin;
  EXPECT_EQ(load(work + "/C.h5", bin), "");  // --format bin wins over the extension
}

TEST_F(Hdf5, MpiRanksWriteIdenticalDatasets) {
  std::mt19937_64 rng(31);
  testing::RandomSpec spec = spec_of(66, 3, 0.25, 0.2);
  const InputRecords a = testing::random_blocks(spec, rng);
  const InputRecords b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  const Bsr expected = expected_bsr(sparse_oracle(a, b));
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string out = work + "/C" + std::to_string(ranks) + ".h5";
    ASSERT_TRUE(succeeded(run_mpi(ranks, {"-q", pa, pb, out})));
    EXPECT_TRUE(read_bsr(out) == expected);
  }
  // More ranks than block-rows: some ranks hold no rows and write nothing but metadata.
  const InputRecords tiny = testing::random_blocks(spec_of(6, 2, 0.7), rng);
  const std::string pt = put("T.bin", tiny);
  ASSERT_TRUE(succeeded(run_mpi(4, {"-q", pt, pt, work + "/T.h5"})));
  EXPECT_TRUE(read_bsr(work + "/T.h5") == expected_bsr(sparse_oracle(tiny, tiny)));
}

// Each rank copies indptr, indices and values into a shared map of the file with several
// threads (io/mapped_writer); the datasets are the oracle's for every thread count, chunk size
// and rank count, and the same as written through pwrite.
TEST_F(Hdf5, WriterThreadsAndChunkSizesGiveTheOracle) {
  std::mt19937_64 rng(1617);
  testing::RandomSpec spec = spec_of(768, 16, 0.5, 0.1);  // about 2 MB of values
  const InputRecords a = testing::random_blocks(spec, rng);
  const InputRecords b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  const Bsr expected = expected_bsr(sparse_oracle(a, b));
  const std::string out = work + "/C.h5";
  for (const char* threads : testing::sweep({"1", "2", "8"})) {
    for (const char* chunk : {"4K", "1M", "256M"}) {
      SCOPED_TRACE(std::string(threads) + " writer threads, --chunk-size " + chunk);
      const std::string env = std::string("BLOCKMM_WRITE_THREADS=") + threads;
      RunOptions options;
      options.set_env = {env};
      ASSERT_TRUE(succeeded(run_blockmm({"-q", "--chunk-size", chunk, pa, pb, out}, options)));
      EXPECT_TRUE(read_bsr(out) == expected);
      for (int ranks : {2, 3}) {
        if (std::string(chunk) == "256M") continue;
        SCOPED_TRACE(std::to_string(ranks) + " ranks");
        ASSERT_TRUE(succeeded(run_mpi(ranks, {"-q", "--threads", "1", "--chunk-size", chunk, pa, pb, out}, {env})));
        EXPECT_TRUE(read_bsr(out) == expected);
      }
    }
  }
  RunOptions pwrite;
  pwrite.set_env = {"BLOCKMM_IO=pwrite"};
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, out}, pwrite)));
  EXPECT_TRUE(read_bsr(out) == expected);
  EXPECT_EQ(list_dir(work), std::vector<std::string>{"C.h5"}) << "a temporary file was left";
}

// ---------------------------------------------------------------------------------------------
// HDF5 inputs

TEST_F(Hdf5, Hdf5InputsGiveTheBinaryProduct) {
  std::mt19937_64 rng(41);
  const InputRecords a = testing::random_blocks(spec_of(45, 3, 0.3, 0.2), rng);  // shuffled records
  const InputRecords b = testing::random_blocks(spec_of(45, 3, 0.3), rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  ASSERT_TRUE(succeeded(run_convert({pa, in_dir + "/A.h5"})));
  ASSERT_TRUE(succeeded(run_convert({pb, in_dir + "/B.h5"})));
  // Inputs as another program would store them: chunked, compressed, int32 indptr (scipy's choice).
  Craft other = craft_from(a);
  other.indptr_type = H5T_STD_I32LE;
  other.chunked_gzip = H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0;
  other.data_type = H5T_STD_U16BE;
  write_craft(in_dir + "/A-other.h5", other);

  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, work + "/C.bin"})));
  const std::vector<std::byte> expected = read_bytes(work + "/C.bin");
  OutputRecords parsed;
  ASSERT_EQ(load(work + "/C.bin", parsed), "");
  EXPECT_EQ(parsed.bytes, sparse_oracle(a, b).bytes);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {in_dir + "/A.h5", in_dir + "/B.h5"}, {in_dir + "/A.h5", pb}, {pa, in_dir + "/B.h5"}, {in_dir + "/A-other.h5", pb}};
  for (const auto& [x, y] : pairs) {
    SCOPED_TRACE(x + " x " + y);
    ASSERT_TRUE(succeeded(run_blockmm({"-q", x, y, work + "/D.bin"})));
    EXPECT_TRUE(read_bytes(work + "/D.bin") == expected);
  }
  // Several ranks: shares of the HDF5 blocks start inside rows.
  ASSERT_TRUE(succeeded(run_mpi(3, {"-q", in_dir + "/A.h5", in_dir + "/B.h5", work + "/E.bin"})));
  EXPECT_TRUE(read_bytes(work + "/E.bin") == expected);
}

// ---------------------------------------------------------------------------------------------
// Malformed HDF5 inputs: exit 3, one line naming the file and the defect, nothing written.

// n = 16, m = 4 (p = 4): row 0 holds columns 0 and 3, rows 1 and 2 are empty, row 3 holds 0..3.
// Two ranks split the six blocks 3 + 3, inside row 3.
InputRecords base_matrix() {
  std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> blocks;
  const std::pair<int, int> where[] = {{0, 0}, {0, 3}, {3, 0}, {3, 1}, {3, 2}, {3, 3}};
  std::uint16_t v = 1;
  for (const auto& [i, j] : where) {
    std::vector<std::uint16_t> values(16);
    for (auto& x : values) x = v++;
    blocks.emplace_back(i, j, values);
  }
  return make_records(16, 4, blocks);
}

struct BadCase {
  std::string name;
  std::function<void(Craft&)> defect;
  std::string fragment;
};

// An integer type with fewer significant bits than its size (HDF5 allows it; libhdf5's conversion
// then depends on the unused bits, and a corrupt file can even declare more bits than bytes).
hid_t padded_integer(hid_t base, std::size_t precision, std::size_t offset) {
  const hid_t type = H5Tcopy(base);
  H5Tset_precision(type, precision);
  H5Tset_offset(type, offset);
  return type;  // one per process, closed at exit
}

std::vector<BadCase> bad_cases() {
  static const hid_t u16_in_12_bits = padded_integer(H5T_STD_U16LE, 12, 0);
  static const hid_t i32_at_offset_8 = padded_integer(H5T_STD_I32LE, 24, 8);
  return {
      {"data-12-bits", [](Craft& c) { c.data_type = u16_in_12_bits; },
       "/data is an integer type of 2 bytes with 12 significant bits at bit offset 0"},
      {"indices-offset", [](Craft& c) { c.indices_type = i32_at_offset_8; },
       "/indices is an integer type of 4 bytes with 24 significant bits at bit offset 8"},
      {"no-format", [](Craft& c) { c.write_format = false; }, "missing root attribute 'format'"},
      {"format", [](Craft& c) { c.format = "scipy-bsr"; }, "format = \"scipy-bsr\"; expected \"blockmm-bsr\""},
      {"version", [](Craft& c) { c.ints["version"] = 2; }, "version = 2"},
      {"no-n", [](Craft& c) { c.ints.erase("n"); }, "missing root attribute 'n'"},
      {"no-m", [](Craft& c) { c.ints.erase("m"); }, "missing root attribute 'm'"},
      {"no-nnzb", [](Craft& c) { c.ints.erase("nnzb"); }, "missing root attribute 'nnzb'"},
      {"float-n", [](Craft& c) { c.float_attribute = "n"; }, "root attribute 'n' is a 64-bit float"},
      {"pair-m", [](Craft& c) { c.pair_attribute = "m"; }, "root attribute 'm' holds 2 values"},
      {"n-zero", [](Craft& c) { c.ints["n"] = 0; }, "n = 0 must lie in"},
      {"m-negative", [](Craft& c) { c.ints["m"] = -4; }, "m = -4 must lie in"},
      {"n-huge", [](Craft& c) { c.ints["n"] = std::int64_t{1} << 33; }, "n = 8589934592 must lie in"},
      {"n-not-multiple", [](Craft& c) { c.ints["n"] = 18; }, "n = 18 is not a multiple of m = 4"},
      {"nnzb-over", [](Craft& c) { c.ints["nnzb"] = 17; }, "nnzb = 17 must lie in [0, (n/m)^2 = 16]"},
      {"nnzb-mismatch", [](Craft& c) { c.ints["nnzb"] = 5; }, "/indices has shape (6,); it must be (nnzb,) = (5,)"},
      {"no-indptr", [](Craft& c) { c.omit.insert("indptr"); }, "missing dataset /indptr"},
      {"no-indices", [](Craft& c) { c.omit.insert("indices"); }, "missing dataset /indices"},
      {"no-data", [](Craft& c) { c.omit.insert("data"); }, "missing dataset /data"},
      {"data-group", [](Craft& c) { c.data_is_group = true; }, "/data is not a dataset"},
      {"data-int16", [](Craft& c) { c.data_type = H5T_STD_I16LE; }, "/data has type signed 16-bit integer"},
      {"data-uint32", [](Craft& c) { c.data_type = H5T_STD_U32LE; }, "/data holds unsigned 32-bit integers, as a blockmm product does"},
      {"data-float", [](Craft& c) { c.data_type = H5T_IEEE_F32LE; }, "/data has type 32-bit float"},
      {"data-uint8", [](Craft& c) { c.data_type = H5T_STD_U8LE; }, "/data has type unsigned 8-bit integer"},
      {"indptr-float", [](Craft& c) { c.indptr_type = H5T_IEEE_F64LE; }, "/indptr has type 64-bit float"},
      {"indices-float", [](Craft& c) { c.indices_type = H5T_IEEE_F32LE; }, "/indices has type 32-bit float"},
      {"indptr-short", [](Craft& c) { c.indptr_dims = {4}; }, "/indptr has shape (4,); it must be (n/m + 1,) = (5,)"},
      {"indices-2d", [](Craft& c) { c.indices_dims = {2, 3}; }, "/indices has shape (2, 3)"},
      {"data-shape", [](Craft& c) { c.data_dims = {6, 4, 5}; }, "/data has shape (6, 4, 5); it must be (nnzb, m, m) = (6, 4, 4)"},
      {"data-2d", [](Craft& c) { c.data_dims = {6, 16}; }, "/data has shape (6, 16)"},
      {"indptr-start", [](Craft& c) { c.indptr = {1, 2, 2, 2, 6}; }, "/indptr[0] = 1; it must be 0"},
      {"indptr-decreasing", [](Craft& c) { c.indptr = {0, 2, 1, 2, 6}; },
       "/indptr decreases at block-row 1: indptr[1] = 2 > indptr[2] = 1"},
      {"indptr-end", [](Craft& c) { c.indptr = {0, 2, 2, 2, 5}; }, "/indptr[4] = 5; it must equal nnzb = 6"},
      // Caught as it is read, before any row is kept for it (not only when the last entry disagrees).
      {"indptr-above-nnzb", [](Craft& c) { c.indptr = {0, 7, 7, 7, 6}; }, "/indptr[1] = 7 exceeds nnzb = 6"},
      {"index-high", [](Craft& c) { c.indices[5] = 4; }, "/indices[5] = 4 (block-row 3) is outside [0, 4)"},
      {"index-negative", [](Craft& c) { c.indices[0] = -1; }, "/indices[0] = -1 (block-row 0) is outside [0, 4)"},
      {"index-huge", [](Craft& c) { c.indices_type = H5T_STD_I64LE; c.indices[4] = std::int64_t{1} << 40; },
       "/indices[4] = 1099511627776 (block-row 3) is outside"},
      {"unsorted", [](Craft& c) { c.indices = {0, 3, 0, 2, 1, 3}; },
       "/indices[4] = 1 (block-row 3) is below /indices[3] = 2"},
      {"duplicate", [](Craft& c) { c.indices[5] = 2; }, "/indices[5] = 2 (block-row 3) repeats /indices[4]: duplicate block (3, 2)"},
  };
}

TEST_F(Hdf5, MalformedInputsAreRejected) {
  const InputRecords base = base_matrix();
  const std::string good = put("good.bin", base);
  for (const BadCase& bad : bad_cases()) {
    SCOPED_TRACE(bad.name);
    Craft craft = craft_from(base);
    bad.defect(craft);
    const std::string path = in_dir + "/" + bad.name + ".h5";
    write_craft(path, craft);
    // As A, then as B (B's checks run after A's file was opened).
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", path, good, out_dir + "/C.bin"}), 3, "blockmm", path, bad.fragment,
                               out_dir));
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", good, path, out_dir + "/C.h5"}), 3, "blockmm", path, bad.fragment,
                               out_dir));
  }
}

// A BSR input written as h5py users write big arrays: /indptr chunked and deflated, `chunk`
// entries a chunk, written piece by piece, so that a file of n = 2^26 with a few blocks is a few
// MB on disk and in this process. `records` must be sorted by (i, j) and hold no duplicates.
void write_compressed_bsr(const std::string& path, const InputRecords& records, hsize_t chunk) {
  const std::int64_t p = records.shape.block_rows(), k = records.size(), mm = records.shape.block_values();
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0) << path;
  {
    const std::string format = "blockmm-bsr";
    Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(type.id, format.size());
    Handle space{H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, "format", type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
    ASSERT_GE(H5Awrite(attribute.id, type.id, format.data()), 0);
  }
  for (const auto& [name, value] : std::vector<std::pair<const char*, std::int64_t>>{
           {"version", 1}, {"n", records.shape.n}, {"m", records.shape.m}, {"nnzb", k}}) {
    Handle space{H5Screate(H5S_SCALAR), H5Sclose};
    Handle attribute{H5Acreate2(file.id, name, H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
    ASSERT_GE(H5Awrite(attribute.id, H5T_NATIVE_INT64, &value), 0);
  }
  // /indptr: entry i counts the blocks of rows below i.
  std::vector<std::int64_t> starts;  // the rows' first blocks, in record order
  for (std::int64_t q = 0; q < k; ++q) starts.push_back(record_row(records.record(q)));
  const hsize_t entries = static_cast<hsize_t>(p + 1);
  Handle space{H5Screate_simple(1, &entries, nullptr), H5Sclose};
  Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  ASSERT_GE(H5Pset_chunk(plist.id, 1, &chunk), 0);
  ASSERT_GE(H5Pset_deflate(plist.id, 1), 0);
  Handle indptr{H5Dcreate2(file.id, "indptr", H5T_STD_I64LE, space.id, H5P_DEFAULT, plist.id, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(indptr.id, 0);
  const hsize_t piece = std::min<hsize_t>(entries, hsize_t{1} << 20);
  std::vector<std::int64_t> values(piece);
  for (hsize_t first = 0; first < entries; first += piece) {
    const hsize_t count = std::min(piece, entries - first);
    for (hsize_t e = 0; e < count; ++e)
      values[e] = std::lower_bound(starts.begin(), starts.end(), static_cast<std::int64_t>(first + e)) - starts.begin();
    Handle file_space{H5Dget_space(indptr.id), H5Sclose};
    ASSERT_GE(H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, &first, nullptr, &count, nullptr), 0);
    Handle memory_space{H5Screate_simple(1, &count, nullptr), H5Sclose};
    ASSERT_GE(H5Dwrite(indptr.id, H5T_NATIVE_INT64, memory_space.id, file_space.id, H5P_DEFAULT, values.data()), 0);
  }
  std::vector<std::int64_t> indices;
  std::vector<std::uint32_t> data;
  for (std::int64_t q = 0; q < k; ++q) {
    indices.push_back(record_col(records.record(q)));
    data.insert(data.end(), records.values(q), records.values(q) + mm);
  }
  const auto m = static_cast<hsize_t>(records.shape.m);
  write_dataset(file.id, "indices", H5T_STD_I32LE, H5T_NATIVE_INT64, {static_cast<hsize_t>(k)}, indices.data(), false);
  write_dataset(file.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT32, {static_cast<hsize_t>(k), m, m}, data.data(), false);
}

InputRecords sorted_records(const InputRecords& in) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(in.size()));
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&in](std::int64_t q) { return std::make_pair(record_row(in.record(q)), record_col(in.record(q))); };
  std::sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return key(x) < key(y); });
  InputRecords out;
  out.shape = in.shape;
  for (std::int64_t q : order) out.bytes.insert(out.bytes.end(), in.record(q), in.record(q) + in.stride());
  return out;
}

// Runs argv to its end and returns its exit code and peak RSS in KB (wait4 of that child alone).
std::pair<RunResult, long> run_with_peak_rss(const std::vector<std::string>& argv) {
  ScratchDir capture("blockmm-hdf5-rss");
  const pid_t pid = spawn_process(argv, RunOptions{}, capture / "out", capture / "err");
  int status = 0;
  struct rusage usage {};
  RunResult run;
  if (::wait4(pid, &status, 0, &usage) != pid) return {run, -1};
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.err = std::string(reinterpret_cast<const char*>(read_bytes(capture / "err").data()), read_bytes(capture / "err").size());
  return {run, usage.ru_maxrss};
}

// Issue 17: an HDF5 input with n = 2^26 and a compressed /indptr (p + 1 = 2^26 + 1 entries, a
// few MB on disk) used to be read whole into memory (512 MB, 4096 times the stored size was
// allowed), then multiplied over arrays of all n/m block-rows. /indptr is now read in bounded
// pieces keeping only the rows that hold blocks, and the run relabels: its memory stays near a
// tiny run's, on one rank and two, with the exact product.
TEST_F(Hdf5, HugeNInputWithACompressedIndptrCostsMemoryByItsBlocks) {
  const std::int32_t n = 1 << 26;
  std::mt19937_64 rng(26);
  std::vector<std::int32_t> pool = {0, n - 1};
  std::uniform_int_distribution<std::int32_t> any(1, n - 2);
  while (pool.size() < 24) pool.push_back(any(rng));
  const InputRecords a = sorted_records(blocks_among(n, 1, pool, 200, rng));
  const InputRecords b = blocks_among(n, 1, pool, 200, rng);
  const std::string pa = in_dir + "/a.h5", pb = put("b.bin", b);
  write_compressed_bsr(pa, a, hsize_t{1} << 18);
  struct stat st {};
  ASSERT_EQ(::stat(pa.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 8 << 20) << "the crafted file should be small: its /indptr is compressed";
  const std::vector<std::byte> expected = encode(pair_oracle(a, b));

  const InputRecords tiny = make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}});
  const std::string pt = put("tiny.bin", tiny);
  const auto [tiny_run, tiny_rss] = run_with_peak_rss({blockmm_bin(), "-q", "--threads", "1", pt, pt, out_dir + "/T.bin"});
  ASSERT_EQ(tiny_run.exit_code, 0) << tiny_run.describe();
  std::remove((out_dir + "/T.bin").c_str());

  // ASan keeps up to 256 MB of freed memory (here: libhdf5's decompressed chunks) in its
  // quarantine, resident: a wider margin there, still far below the 3.4 GB of the old reader.
#ifdef BLOCKMM_TEST_ASAN
  constexpr long kMarginKb = 512 * 1024;
#else
  constexpr long kMarginKb = 24 * 1024;
#endif
  const std::string out = out_dir + "/C.bin";
  for (const auto& [x, y] : {std::pair<std::string, std::string>{pa, pb}, {pb, pa}}) {
    const bool a_first = x == pa;
    const auto [run, rss] = run_with_peak_rss({blockmm_bin(), "-q", "--threads", "1", x, y, out});
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_LT(rss, tiny_rss + kMarginKb) << "tiny run: " << tiny_rss << " KB";
    std::cout << "[ info ] n = 2^26 HDF5 input (compressed /indptr): peak RSS " << rss << " KB (tiny run: " << tiny_rss
              << " KB)\n";
    EXPECT_TRUE(read_bytes(out) == (a_first ? expected : encode(pair_oracle(b, a))));
    std::remove(out.c_str());
  }
  const RunResult two = run_mpi(2, {"-q", "--threads", "1", pa, pb, out});
  ASSERT_TRUE(succeeded(two));
  EXPECT_TRUE(read_bytes(out) == expected) << "two ranks differ";
}

// libhdf5 expands a whole chunk to read any part of it: a compressed /indptr in one chunk of
// more than 64 MiB is refused (exit 3, one line) instead of decompressed.
TEST_F(Hdf5, IndptrChunksAboveTheBoundAreRefused) {
  const std::int32_t n = 1 << 23;  // p + 1 entries of 8 bytes: 64 MiB + 8 in one chunk
  const InputRecords a = make_records(n, 1, {{n - 1, 0, {5}}}), b = make_records(n, 1, {{0, n - 1, {7}}});
  const std::string pa = in_dir + "/one_chunk.h5", pb = put("b.bin", b);
  write_compressed_bsr(pa, a, static_cast<hsize_t>(n) + 1);
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", pa, pb, out_dir + "/C.bin"}), 3, "blockmm", pa,
                             "/indptr is stored in chunks of 67108872 bytes; blockmm reads chunks of at most 67108864",
                             out_dir));
  // One entry fewer a chunk: read, and the product is right.
  write_compressed_bsr(pa, a, static_cast<hsize_t>(n));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, out_dir + "/C.bin"})));
  EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == encode(pair_oracle(a, b)));
}

TEST_F(Hdf5, NotReallyHdf5) {
  std::vector<std::byte> bytes(4096, std::byte{0x5a});
  const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::memcpy(bytes.data(), signature, 8);
  write_bytes(in_dir + "/fake.h5", bytes);
  const std::string good = put("good.bin", base_matrix());
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", in_dir + "/fake.h5", good, out_dir + "/C.bin"}), 3, "blockmm",
                             in_dir + "/fake.h5", "cannot open as an HDF5 file", out_dir));
}

TEST_F(Hdf5, OrderIsCheckedAcrossRankShares) {
  // Two ranks read blocks [0, 3) and [3, 6); blocks 2 and 3 are both in row 3, so only the
  // one-before read of rank 1 sees these defects.
  const InputRecords base = base_matrix();
  const std::string good = put("good.bin", base);
  const std::vector<std::pair<std::vector<std::int64_t>, std::string>> cases = {
      {{0, 3, 0, 0, 2, 3}, "/indices[3] = 0 (block-row 3) repeats /indices[2]: duplicate block (3, 0)"},
      {{0, 3, 1, 0, 2, 3}, "/indices[3] = 0 (block-row 3) is below /indices[2] = 1"}};
  int q = 0;
  for (const auto& [indices, fragment] : cases) {
    Craft craft = craft_from(base);
    craft.indices = indices;
    const std::string path = in_dir + "/boundary" + std::to_string(q++) + ".h5";
    write_craft(path, craft);
    EXPECT_TRUE(failed_cleanly(run_mpi(2, {"-q", path, good, out_dir + "/C.h5"}), 3, "blockmm", path, fragment,
                               out_dir, false));
  }
}

// ---------------------------------------------------------------------------------------------
// Storage outside the file: refused (exit 3), never read. A user block: read correctly.

// Adds /data (the values of `c`, stored as uint16) to `path` in one of the ways HDF5 offers to keep
// a dataset's values in another file, or (soft) under another name of the same file.
enum class Elsewhere { external_storage, external_fifo, virtual_dataset, external_link, soft_link };

void add_data_elsewhere(const std::string& path, const Craft& c, Elsewhere how, const std::string& dir) {
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0);
  const std::vector<hsize_t> dims = c.data_dims;
  Handle space{H5Screate_simple(3, dims.data(), nullptr), H5Sclose};
  const hsize_t bytes = 2 * dims[0] * dims[1] * dims[2];
  switch (how) {
    case Elsewhere::external_storage:
    case Elsewhere::external_fifo: {
      const std::string raw = dir + (how == Elsewhere::external_fifo ? "/values.fifo" : "/values.raw");
      Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
      ASSERT_GE(H5Pset_external(plist.id, raw.c_str(), 0, bytes), 0);
      Handle set{H5Dcreate2(file.id, "data", H5T_STD_U16LE, space.id, H5P_DEFAULT, plist.id, H5P_DEFAULT), H5Dclose};
      ASSERT_GE(set.id, 0);
      if (how == Elsewhere::external_storage) {
        ASSERT_GE(H5Dwrite(set.id, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data.data()), 0);
      } else {
        ASSERT_EQ(::mkfifo(raw.c_str(), 0600), 0);  // no writer ever comes: a read would block for ever
      }
      break;
    }
    case Elsewhere::virtual_dataset: {
      const std::string source = dir + "/source.h5";
      {
        Handle other{H5Fcreate(source.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
        Handle set{H5Dcreate2(other.id, "values", H5T_STD_U16LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose};
        ASSERT_GE(H5Dwrite(set.id, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data.data()), 0);
      }
      Handle plist{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
      ASSERT_GE(H5Pset_virtual(plist.id, space.id, source.c_str(), "/values", space.id), 0);
      Handle set{H5Dcreate2(file.id, "data", H5T_STD_U16LE, space.id, H5P_DEFAULT, plist.id, H5P_DEFAULT), H5Dclose};
      ASSERT_GE(set.id, 0);
      break;
    }
    case Elsewhere::external_link: {
      const std::string other_path = dir + "/other.h5";
      {
        Handle other{H5Fcreate(other_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
        write_dataset(other.id, "data", H5T_STD_U16LE, H5T_NATIVE_UINT32, dims, c.data.data(), false);
      }
      ASSERT_GE(H5Lcreate_external(other_path.c_str(), "/data", file.id, "data", H5P_DEFAULT, H5P_DEFAULT), 0);
      break;
    }
    case Elsewhere::soft_link: {
      write_dataset(file.id, "values", H5T_STD_U16LE, H5T_NATIVE_UINT32, dims, c.data.data(), false);
      ASSERT_GE(H5Lcreate_soft("/values", file.id, "data", H5P_DEFAULT, H5P_DEFAULT), 0);
      break;
    }
  }
}

TEST_F(Hdf5, ValuesStoredOutsideTheFileAreRefused) {
  const InputRecords base = base_matrix();
  const std::string good = put("good.bin", base);
  const std::vector<std::tuple<std::string, Elsewhere, std::string>> cases = {
      {"external", Elsewhere::external_storage, "/data keeps its values in an external file"},
      {"fifo", Elsewhere::external_fifo, "/data keeps its values in an external file"},
      {"virtual", Elsewhere::virtual_dataset, "/data is a virtual dataset"},
      {"external-link", Elsewhere::external_link, "/data is an external link"},
      {"soft-link", Elsewhere::soft_link, "/data is a soft link"},
  };
  for (const auto& [name, how, fragment] : cases) {
    SCOPED_TRACE(name);
    const std::string dir = scratch.subdir(name);
    const std::string path = dir + "/A.h5";
    Craft craft = craft_from(base);
    craft.omit.insert("data");
    write_craft(path, craft);
    add_data_elsewhere(path, craft, how, dir);
    RunOptions options;
    options.timeout_seconds = 30;  // the FIFO: a hang is a failure, not a stuck suite
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", path, good, out_dir + "/C.bin"}, options), 3, "blockmm", path,
                               fragment, out_dir));
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", good, path, out_dir + "/C.h5"}, options), 3, "blockmm", path,
                               fragment, out_dir));
    const RunResult convert = run_process({convert_bin(), path, out_dir + "/D.bin"}, options);
    EXPECT_TRUE(failed_cleanly(convert, 3, "blockmm-convert", path, fragment, out_dir));
  }
}

// A user block (H5Pset_userblock: bytes before the HDF5 superblock, for a header of another
// program) shifts every address in the file; the values must still be the matrix's.
TEST_F(Hdf5, UserBlockFilesAreReadCorrectly) {
  std::mt19937_64 rng(77);
  const InputRecords a = testing::random_blocks(spec_of(60, 4, 0.4, 0.1), rng);
  const InputRecords b = testing::random_blocks(spec_of(60, 4, 0.4), rng);
  const std::string pb = put("B.bin", b);
  for (const hsize_t userblock : {512u, 4096u}) {
    SCOPED_TRACE(userblock);
    const std::string path = in_dir + "/A-ub" + std::to_string(userblock) + ".h5";
    Craft craft = craft_from(a);
    craft.userblock = userblock;
    write_craft(path, craft);
    {
      std::vector<std::byte> bytes = read_bytes(path);
      ASSERT_GT(bytes.size(), userblock);
      for (hsize_t q = 0; q < userblock; ++q) bytes[q] = std::byte{0xa5};  // another program's header
      write_bytes(path, bytes);
    }
    ASSERT_TRUE(succeeded(run_blockmm({"-q", path, pb, work + "/C.bin"})));
    OutputRecords product;
    ASSERT_EQ(load(work + "/C.bin", product), "");
    EXPECT_EQ(product.bytes, sparse_oracle(a, b).bytes);
    ASSERT_TRUE(succeeded(run_convert({path, work + "/A.bin"})));
    EXPECT_TRUE(read_bytes(work + "/A.bin") == encode(sorted(a)));
    // Cut short by one byte: the end the superblock records (relative to the user block) is gone.
    std::vector<std::byte> bytes = read_bytes(path);
    bytes.pop_back();
    write_bytes(path, bytes);
    EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", path, pb, out_dir + "/C.bin"}), 3, "blockmm", path, "truncated",
                               out_dir));
  }
}

// ---------------------------------------------------------------------------------------------
// Failed writes leave nothing behind

// Runs `argv` with the file size limited to `blocks` * 512 bytes and SIGXFSZ ignored, so that
// writes past the limit fail with EFBIG instead of killing the process.
RunResult run_with_file_limit(int blocks, const std::vector<std::string>& argv) {
  std::vector<std::string> full{"/bin/sh", "-c", "trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec \"$@\"",
                                "sh"};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_process(full, with_mpi_env());
}

TEST_F(Hdf5, FailedWritesLeaveNoFile) {
  // The file size limit also binds mpiexec's own session files, so only plain runs are limited
  // here; under MPI a failed rank's error reaches every rank through the same agreement as any
  // other failure.
  std::mt19937_64 rng(51);
  const InputRecords a = testing::random_blocks(spec_of(400, 8, 0.3), rng);  // a product of about 640 kB
  const std::string pa = put("A.bin", a);
  const std::string out = out_dir + "/C.h5";
  for (int blocks : {1, 16, 256}) {  // metadata fails to fit, then the datasets' storage
    SCOPED_TRACE(std::to_string(blocks) + " blocks of 512 bytes");
    EXPECT_TRUE(failed_cleanly(run_with_file_limit(blocks, {blockmm_bin(), "-q", pa, pa, out}), 4, "blockmm", out,
                               "File too large", out_dir));
  }
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pa, work + "/C.bin"})));
  EXPECT_TRUE(failed_cleanly(run_with_file_limit(256, {convert_bin(), work + "/C.bin", out}), 4, "blockmm-convert",
                             out, "File too large", out_dir));
}

}  // namespace
}  // namespace blockmm::e2e
