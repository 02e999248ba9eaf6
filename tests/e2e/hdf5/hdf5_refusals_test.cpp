// Malformed HDF5 inputs end to end, label "hdf5": every rule (exit 3, one line naming the file and
// the defect, nothing written), a file that is not really HDF5, and values stored outside the file
// (external storage, a FIFO, virtual datasets, links), refused and never read. Files are crafted
// with the HDF5 C API directly (bsr_files.hpp).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <functional>
#include <string>
#include <vector>

#include "e2e/hdf5/hdf5_fixture.hpp"

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// Malformed HDF5 inputs: exit 3, one line naming the file and the defect, nothing written.

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

TEST_F(Hdf5, NotReallyHdf5) {
  std::vector<std::byte> bytes(4096, std::byte{0x5a});
  const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::memcpy(bytes.data(), signature, 8);
  write_bytes(in_dir + "/fake.h5", bytes);
  const std::string good = put("good.bin", base_matrix());
  EXPECT_TRUE(failed_cleanly(run_blockmm({"-q", in_dir + "/fake.h5", good, out_dir + "/C.bin"}), 3, "blockmm",
                             in_dir + "/fake.h5", "cannot open as an HDF5 file", out_dir));
}

// ---------------------------------------------------------------------------------------------
// Storage outside the file: refused (exit 3), never read.

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

}  // namespace
}  // namespace blockmm::e2e
