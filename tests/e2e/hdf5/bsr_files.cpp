#include "e2e/hdf5/bsr_files.hpp"

#include <gtest/gtest.h>

namespace blockmm::e2e {
namespace {

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

}  // namespace

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

}  // namespace blockmm::e2e
