// The HDF5 BSR writers declared in hdf5_bsr.hpp: the layout of a file (or of a parted output's
// main file and part files) made with HDF5, then its raw contents written by the caller at the
// offsets HDF5 allocated.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/hdf5_support.hpp"
#include "io/output_parts.hpp"

// Raw contents are written as host bytes into datasets declared little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "blockmm's file formats assume a little-endian host");

namespace blockmm::io {
namespace {

using hdf5::Handle;

constexpr char kFormat[] = "blockmm-bsr";
constexpr char kPartFormat[] = "blockmm-bsr-part";
constexpr std::int64_t kVersion = 1;

}  // namespace

std::string BsrLayout::encode() const {
  return std::to_string(indptr) + " " + std::to_string(indices) + " " + std::to_string(data);
}

BsrLayout BsrLayout::decode(const std::string& text) {
  BsrLayout layout;
  std::istringstream in(text);
  in >> layout.indptr >> layout.indices >> layout.data;
  return layout;
}

namespace {

class Creator {
 public:
  Creator(const std::string& path, const std::string& shown) : path_(path), shown_(shown) {}
  [[noreturn]] void fail(const std::string& what) const { throw OutputError(shown_ + ": " + what + hdf5::error_detail()); }

  // `user_block` > 0: that many bytes before HDF5's superblock, left for the caller to fill.
  void create(hsize_t user_block = 0) {
    Handle fapl = hdf5::file_access(false);  // the temporary file is ours alone
    if (!fapl.valid()) fail("cannot prepare HDF5 file access");
    // A character device (/dev/null for a timing run) is written in place and cannot hold HDF5's
    // metadata (HDF5 sizes its file at close): lay the file out in memory, where the offsets come
    // out the same, and let only the raw contents go to the device.
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0)
      fail("cannot prepare an in-memory HDF5 layout for the device " + path_);
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    if (!fcpl.valid() || (user_block > 0 && H5Pset_userblock(fcpl.get(), user_block) < 0))
      fail("cannot prepare the HDF5 file creation");
    file_ = Handle(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
    if (!file_.valid()) fail("cannot create the HDF5 file " + path_);
  }

  void string_attribute(const char* name, const char* value) {
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    // Variable-length UTF-8: what h5py writes for a Python str, and reads back as one.
    if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
      fail(std::string("cannot make the type of attribute '") + name + "'");
    write_attribute(name, type.get(), &value);
  }

  void int_attribute(const char* name, std::int64_t value) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle attribute(H5Acreate2(file_.get(), name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!space.valid() || !attribute.valid() || H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value) < 0 ||
        !attribute.close())
      fail(std::string("cannot write the attribute '") + name + "'");
  }

  // A contiguous dataset whose storage is allocated now and never filled: its bytes are written
  // later, outside HDF5, at the offset this returns (-1 when empty: no storage).
  std::int64_t dataset(const char* name, hid_t file_type, const std::vector<hsize_t>& dims) {
    Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    if (!space.valid()) fail(std::string("cannot make the shape of /") + name);
    Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!plist.valid() || H5Pset_layout(plist.get(), H5D_CONTIGUOUS) < 0 ||
        H5Pset_alloc_time(plist.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(plist.get(), H5D_FILL_TIME_NEVER) < 0 ||
        // No modification times in the object headers: the same product gives the same bytes,
        // whichever run or tool wrote it (blockmm-convert's join of a parted output included).
        H5Pset_obj_track_times(plist.get(), 0) < 0)
      fail(std::string("cannot set the storage of /") + name);
    Handle set(H5Dcreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), H5Dclose);
    if (!set.valid()) fail(std::string("cannot create the dataset /") + name);
    hsize_t elements = 1;
    for (hsize_t d : dims) elements *= d;
    std::int64_t offset = -1;
    if (elements > 0) {
      const haddr_t address = H5Dget_offset(set.get());
      if (address == HADDR_UNDEF) fail(std::string("HDF5 allocated no contiguous storage for /") + name);
      offset = static_cast<std::int64_t>(address);
    }
    if (!set.close()) fail(std::string("cannot close the dataset /") + name);
    return offset;
  }

  // A virtual dataset of `dims` whose blocks [first, first + blocks) of each part are the whole
  // dataset `source` of that part's file, named by its file name alone: libhdf5 looks for a
  // relative source name beside the file holding the virtual dataset first (after
  // HDF5_VDS_PREFIX, where set), whatever the reader's working directory. `fill`: what a reader
  // sees where a part is missing (-1 for block-columns, which no block has).
  void virtual_dataset(const char* name, hid_t file_type, const std::vector<hsize_t>& dims,
                       const std::vector<BsrPartSpec>& parts, const char* source, const std::int32_t* fill) {
    Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!space.valid() || !plist.valid() || H5Pset_obj_track_times(plist.get(), 0) < 0 ||
        (fill != nullptr && H5Pset_fill_value(plist.get(), H5T_NATIVE_INT32, fill) < 0))
      fail(std::string("cannot prepare the virtual dataset /") + name);
    for (const BsrPartSpec& part : parts) {
      std::vector<hsize_t> start(dims.size(), 0), count = dims, source_dims = dims;
      start[0] = static_cast<hsize_t>(part.first);
      count[0] = source_dims[0] = static_cast<hsize_t>(part.blocks);
      Handle source_space(H5Screate_simple(static_cast<int>(dims.size()), source_dims.data(), nullptr), H5Sclose);
      if (!source_space.valid() ||
          H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Pset_virtual(plist.get(), space.get(), part.name.c_str(), source, source_space.get()) < 0)
        fail(std::string("cannot map part ") + part.name + " into /" + name);
    }
    if (H5Sselect_all(space.get()) < 0) fail(std::string("cannot make the shape of /") + name);
    Handle set(H5Dcreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), H5Dclose);
    if (!set.valid() || !set.close()) fail(std::string("cannot create the virtual dataset /") + name);
  }

  void close() {
    if (!file_.close()) fail("cannot write the HDF5 metadata of " + path_);
  }

 private:
  void write_attribute(const char* name, hid_t type, const void* value) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle attribute(H5Acreate2(file_.get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!space.valid() || !attribute.valid() || H5Awrite(attribute.get(), type, value) < 0 || !attribute.close())
      fail(std::string("cannot write the attribute '") + name + "'");
  }

  std::string path_;
  std::string shown_;
  Handle file_;
};

}  // namespace

namespace {

hid_t file_value_type(ValueWidth width) { return width == ValueWidth::u16 ? H5T_STD_U16LE : H5T_STD_U32LE; }

void root_attributes(Creator& file, const BsrHeader& header) {
  file.string_attribute("format", kFormat);
  file.int_attribute("version", kVersion);
  file.int_attribute("n", header.n);
  file.int_attribute("m", header.m);
  file.int_attribute("nnzb", header.nnzb);
}

// The file's size after HDF5 closed it, less the raw bytes of its datasets: its metadata.
std::int64_t metadata_of(const std::string& path, const std::string& shown, std::int64_t raw) {
  // HDF5 sets the file's end past all allocated storage at close; the readers check it.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw OutputError(shown + ": cannot stat " + path + " after creating it");
  return std::max<std::int64_t>(0, static_cast<std::int64_t>(st.st_size) - raw);
}

}  // namespace

BsrLayout create_bsr_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                          std::int64_t* metadata_bytes) {
  hdf5::silence_errors();
  const auto p = static_cast<hsize_t>(header.block_rows());
  const auto k = static_cast<hsize_t>(header.nnzb);
  const auto m = static_cast<hsize_t>(header.m);
  Creator file(path, shown);
  file.create();
  root_attributes(file, header);
  BsrLayout layout;
  layout.indptr = file.dataset("indptr", H5T_STD_I64LE, {p + 1});
  layout.indices = file.dataset("indices", H5T_STD_I32LE, {k});
  layout.data = file.dataset("data", file_value_type(header.width), {k, m, m});
  file.close();
  const std::int64_t raw = 8 * static_cast<std::int64_t>(p + 1) + header.nnzb * (4 + static_cast<std::int64_t>(header.width) * header.block_values());
  if (metadata_bytes != nullptr) *metadata_bytes = metadata_of(path, shown, raw);
  return layout;
}

BsrLayout create_parted_bsr_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                                 const std::vector<BsrPartSpec>& parts, std::int64_t* metadata_bytes) {
  hdf5::silence_errors();
  const auto p = static_cast<hsize_t>(header.block_rows());
  const auto k = static_cast<hsize_t>(header.nnzb);
  const auto m = static_cast<hsize_t>(header.m);
  Creator file(path, shown);
  file.create(static_cast<hsize_t>(kPartsUserBlockBytes));
  root_attributes(file, header);
  file.int_attribute("parts", static_cast<std::int64_t>(parts.size()));
  BsrLayout layout;
  layout.indptr = file.dataset("indptr", H5T_STD_I64LE, {p + 1});
  const std::int32_t no_column = -1;
  file.virtual_dataset("indices", H5T_STD_I32LE, {k}, parts, "/indices", &no_column);
  file.virtual_dataset("data", file_value_type(header.width), {k, m, m}, parts, "/data", nullptr);
  file.close();
  if (metadata_bytes != nullptr) *metadata_bytes = metadata_of(path, shown, 8 * static_cast<std::int64_t>(p + 1));
  return layout;
}

BsrLayout create_bsr_part_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                               const std::string& generation, int index, int parts, const BsrPartSpec& part,
                               std::int64_t* metadata_bytes) {
  hdf5::silence_errors();
  const auto k = static_cast<hsize_t>(part.blocks);
  const auto m = static_cast<hsize_t>(header.m);
  Creator file(path, shown);
  file.create();
  file.string_attribute("format", kPartFormat);
  file.int_attribute("version", kVersion);
  file.string_attribute("generation", generation.c_str());
  file.int_attribute("part", index);
  file.int_attribute("parts", parts);
  file.int_attribute("first", part.first);
  file.int_attribute("nnzb", part.blocks);
  file.int_attribute("m", header.m);
  BsrLayout layout;
  layout.indices = file.dataset("indices", H5T_STD_I32LE, {k});
  layout.data = file.dataset("data", file_value_type(header.width), {k, m, m});
  file.close();
  const std::int64_t raw = part.blocks * (4 + static_cast<std::int64_t>(header.width) * header.block_values());
  if (metadata_bytes != nullptr) *metadata_bytes = metadata_of(path, shown, raw);
  return layout;
}

BsrContentWriter::BsrContentWriter(FileWriter& file, const BsrHeader& header, const BsrLayout& layout)
    : file_(file), header_(header), layout_(layout) {}

void BsrContentWriter::write_indptr(std::int64_t first_row, const std::int64_t* values, std::int64_t count) {
  if (count == 0) return;
  if (first_row < 0 || first_row + count > std::int64_t{header_.block_rows()} + 1)
    throw Error(ExitCode::other, "internal error: indptr entries [" + std::to_string(first_row) + ", " +
                                     std::to_string(first_row + count) + ") outside the file's");
  file_.write_at(layout_.indptr + 8 * first_row, values, 8 * count);
  written_ += 8 * count;
}

bool BsrContentWriter::write_records(std::int64_t first_block, std::int64_t count, const std::byte* records,
                                     const RecordCheck& check) {
  if (count == 0) return true;
  if (first_block < 0 || first_block + count > header_.nnzb)
    throw Error(ExitCode::other, "internal error: blocks [" + std::to_string(first_block) + ", " +
                                     std::to_string(first_block + count) + ") outside the file's " +
                                     std::to_string(header_.nnzb));
  const std::int64_t value_bytes = static_cast<std::int64_t>(header_.width) * header_.block_values();
  // Each record's block-column into /indices, its values into /data: one copy, by the file's
  // writer (several threads into shared maps where it maps).
  if (!file_.write_fields(records, count, 8 + value_bytes,
                          {FieldCopy{4, 4, layout_.indices + 4 * first_block},
                           FieldCopy{8, value_bytes, layout_.data + value_bytes * first_block}},
                          check))
    return false;
  written_ += (4 + value_bytes) * count;
  return true;
}

}  // namespace blockmm::io
