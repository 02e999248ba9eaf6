// The HDF5 readers' checks (hdf5_checks.hpp).
#include "io/hdf5_checks.hpp"

#include <iomanip>
#include <sstream>

#include "core/error.hpp"
#include "io/library_guard.hpp"

namespace blockmm::io::hdf5 {

std::string printable(const std::string& text) {
  constexpr std::size_t kLongest = 64;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kLongest; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return text.size() > kLongest ? out + "..." : out;
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string text = "(";
  for (std::size_t d = 0; d < dims.size(); ++d) text += (d > 0 ? ", " : "") + std::to_string(dims[d]);
  return text + (dims.size() == 1 ? ",)" : ")");  // numpy's spelling: (5,) (2, 3) ()
}

// A byte count from the file's claims, as text. The claims are multiplied and added in double and
// may pass 2^64, which no integer type holds (a fuzzed file put a dataset at an offset near 2^64):
// those print as doubles ("1.845e+19").
std::string claimed_bytes(double bytes) {
  if (bytes < 18446744073709551616.0) return std::to_string(static_cast<unsigned long long>(bytes));
  std::ostringstream text;
  text << std::setprecision(4) << bytes;
  return text.str();
}

void CheckedFile::fail(const std::string& what) const { throw InputError(shown_ + ": " + what); }

bool CheckedFile::has_attribute(const char* name) const {
  const htri_t exists = H5Aexists(file_, name);
  if (exists < 0) fail_hdf5(std::string("cannot look up the root attribute '") + name + "'");
  return exists > 0;
}

Handle CheckedFile::open_attribute(const char* name) const {
  const htri_t exists = H5Aexists(file_, name);
  if (exists < 0) fail_hdf5(std::string("cannot look up the root attribute '") + name + "'");
  if (exists == 0)
    fail(std::string("missing root attribute '") + name + "' (" + attribute_hint_ + ")");
  Handle attribute(H5Aopen(file_, name, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) fail_hdf5(std::string("cannot open the root attribute '") + name + "'");
  Handle space(H5Aget_space(attribute.get()), H5Sclose);
  if (!space.valid()) fail_hdf5(std::string("cannot read the shape of the root attribute '") + name + "'");
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1)
    fail(std::string("root attribute '") + name + "' holds " + std::to_string(points) + " values; it must hold one");
  return attribute;
}

std::int64_t CheckedFile::int_attribute(const char* name) const {
  Handle attribute = open_attribute(name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(std::string("cannot read the type of the root attribute '") + name + "'");
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    fail(std::string("root attribute '") + name + "' is a " + hdf5::describe_type(type.get()) +
         "; it must be an integer");
  check_plain_integer(type.get(), std::string("root attribute '") + name + "'");
  std::int64_t value = 0;
  // HDF5 converts any integer type; values outside int64 clip and then fail the range checks.
  if (H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0)
    fail_hdf5(std::string("cannot read the root attribute '") + name + "'");
  return value;
}

std::string CheckedFile::string_attribute(const char* name) const {
  Handle attribute = open_attribute(name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(std::string("cannot read the type of the root attribute '") + name + "'");
  if (H5Tget_class(type.get()) != H5T_STRING)
    fail(std::string("root attribute '") + name + "' is a " + hdf5::describe_type(type.get()) + "; it must be a string");
  // Read as stored (a copy of the file's type): no conversion between character sets or paddings.
  Handle memory(H5Tcopy(type.get()), H5Tclose);
  if (!memory.valid()) fail_hdf5(std::string("cannot prepare to read the root attribute '") + name + "'");
  const htri_t variable = H5Tis_variable_str(type.get());
  if (variable < 0) fail_hdf5(std::string("cannot read the type of the root attribute '") + name + "'");
  std::string value;
  if (variable > 0) {  // h5py's default for str
    char* text = nullptr;
    {
      // The string lives in the file's global heap, whose reader in libhdf5 1.10 crashes or
      // loops on corrupt sizes and addresses: a crash or a stall here is a corrupt file.
      const LibraryGuard guard(shown_, "libhdf5", std::string("reading the root attribute '") + name + "'",
                               LibraryGuard::metadata_timeout_seconds());
      if (H5Aread(attribute.get(), memory.get(), &text) < 0)
        fail_hdf5(std::string("cannot read the root attribute '") + name + "'");
    }
    if (text != nullptr) {
      value = text;
      H5free_memory(text);
    }
  } else {  // fixed length, as numpy bytes are stored
    const std::size_t size = H5Tget_size(type.get());
    if (size == 0 || size > 4096) fail(std::string("root attribute '") + name + "' is not a short string");
    std::vector<char> text(size + 1, '\0');
    if (H5Aread(attribute.get(), memory.get(), text.data()) < 0)
      fail_hdf5(std::string("cannot read the root attribute '") + name + "'");
    value = text.data();  // stops at the first NUL
    while (!value.empty() && value.back() == ' ') value.pop_back();  // space-padded strings
  }
  return value;
}

Handle CheckedFile::open_dataset(const char* name, bool allow_virtual) const {
  const htri_t exists = H5Lexists(file_, name, H5P_DEFAULT);
  if (exists < 0) fail_hdf5(std::string("cannot look up /") + name);
  if (exists == 0) fail(std::string("missing dataset /") + name + " (" + dataset_hint_ + ")");
  // Only the file's own datasets are read: a link to another file (or to another name) would read
  // whatever file it names as matrix values. Checked before anything follows the link.
  H5L_info_t link {};
  if (H5Lget_info(file_, name, &link, H5P_DEFAULT) < 0) fail_hdf5(std::string("cannot look up /") + name);
  if (link.type == H5L_TYPE_EXTERNAL)
    fail(std::string("/") + name + " is an external link (to a dataset in another file); blockmm reads only datasets "
                                   "stored in the file itself");
  if (link.type != H5L_TYPE_HARD)
    fail(std::string("/") + name + (link.type == H5L_TYPE_SOFT ? " is a soft link" : " is a user-defined link") +
         "; blockmm reads only datasets stored under their own name");
  {
    // H5Oopen + H5Iget_type: the same in HDF5 1.8 to 1.14 (H5Oget_info changed signature twice).
    Handle object(H5Oopen(file_, name, H5P_DEFAULT), H5Oclose);
    if (!object.valid()) fail_hdf5(std::string("cannot open /") + name);
    if (H5Iget_type(object.get()) != H5I_DATASET) fail(std::string("/") + name + " is not a dataset");
  }
  Handle dataset(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) fail_hdf5(std::string("cannot open the dataset /") + name);
  // Values kept in other files (external raw storage, virtual datasets) would be read from
  // whatever those names point at, a FIFO included (which blocks for ever): refused before any read.
  Handle plist(H5Dget_create_plist(dataset.get()), H5Pclose);
  if (!plist.valid()) fail_hdf5(std::string("cannot read the storage of /") + name);
  const H5D_layout_t layout = H5Pget_layout(plist.get());
  if (layout < 0) fail_hdf5(std::string("cannot read the storage of /") + name);
  if (layout == H5D_VIRTUAL && !allow_virtual)
    fail(std::string("/") + name + " is a virtual dataset (its values live in other datasets or files); blockmm reads "
                                   "only values stored in the file itself");
  const int external = H5Pget_external_count(plist.get());
  if (external < 0) fail_hdf5(std::string("cannot read the storage of /") + name);
  if (external > 0)
    fail(std::string("/") + name + " keeps its values in an external file (" + std::to_string(external) +
         " external storage entries); blockmm reads only values stored in the file itself");
  return dataset;
}

std::vector<hsize_t> CheckedFile::dims_of(hid_t dataset, const char* name) const {
  Handle space(H5Dget_space(dataset), H5Sclose);
  if (!space.valid()) fail_hdf5(std::string("cannot read the shape of /") + name);
  const H5S_class_t kind = H5Sget_simple_extent_type(space.get());
  if (kind == H5S_NULL || kind == H5S_SCALAR) return {};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail_hdf5(std::string("cannot read the shape of /") + name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
    fail_hdf5(std::string("cannot read the shape of /") + name);
  return dims;
}

// An integer type may declare fewer significant bits than its size holds, at an offset: libhdf5's
// conversion of such a type (or of one whose precision exceeds its size, as a corrupt file can
// declare) yields values that depend on bytes outside the stored ones. Only plain integers, every
// bit of every byte significant, are read.
void CheckedFile::check_plain_integer(hid_t type, const std::string& what) const {
  const std::size_t size = H5Tget_size(type);
  const std::size_t precision = H5Tget_precision(type);
  const int offset = H5Tget_offset(type);
  if ((size != 1 && size != 2 && size != 4 && size != 8) || precision != 8 * size || offset != 0)
    fail(what + " is an integer type of " + std::to_string(size) + " bytes with " + std::to_string(precision) +
         " significant bits at bit offset " + std::to_string(offset) +
         "; only plain 8-, 16-, 32- or 64-bit integers are read");
}

void CheckedFile::check_integer_type(hid_t dataset, const char* name, const char* wanted) const {
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (!type.valid()) fail_hdf5(std::string("cannot read the type of /") + name);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    fail(std::string("/") + name + " has type " + hdf5::describe_type(type.get()) + "; it must be an integer type (" +
         wanted + ")");
  check_plain_integer(type.get(), std::string("/") + name);
}

void CheckedFile::read_hyperslab(hid_t dataset, const char* name, hid_t memory_type,
                                     const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                                     void* destination) const {
  Handle file_space(H5Dget_space(dataset), H5Sclose);
  if (!file_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
    fail_hdf5(std::string("cannot select blocks of /") + name);
  Handle memory_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  if (!memory_space.valid()) fail_hdf5(std::string("cannot prepare to read /") + name);
  if (H5Dread(dataset, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, destination) < 0)
    fail_hdf5(std::string("cannot read /") + name + " from entry " + std::to_string(start[0]));
}

// Nothing is allocated from the attributes and shapes before they are checked against what the
// file holds: a dataset that was never written reads as fill values, so a file of a few
// hundred bytes could otherwise declare (and have blockmm allocate) billions of entries.
// An uncompressed dataset must have all of its bytes stored in the file; a compressed one may
// expand at most kMaxExpansion times (deflate tops out near 1032).
void CheckedFile::check_stored(hid_t dataset, const char* name, std::int64_t file_bytes) const {
  constexpr double kMaxExpansion = 4096;
  Handle type(H5Dget_type(dataset), H5Tclose);
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!type.valid() || !plist.valid()) fail_hdf5(std::string("cannot read the storage of /") + name);
  const int filters = H5Pget_nfilters(plist.get());
  if (filters < 0) fail_hdf5(std::string("cannot read the storage of /") + name);
  double declared = static_cast<double>(H5Tget_size(type.get()));  // in double: the product may pass 2^64
  for (hsize_t d : dims_of(dataset, name)) declared *= static_cast<double>(d);
  if (declared == 0) return;
  const double stored = static_cast<double>(H5Dget_storage_size(dataset));
  if (filters == 0 && (stored < declared || declared > static_cast<double>(file_bytes)))
    fail(std::string("/") + name + " declares " + claimed_bytes(declared) + " bytes but the file (" +
         std::to_string(file_bytes) + " bytes) stores " + claimed_bytes(stored) +
         " of them: truncated, never written, or stored outside the file");
  // Contiguous storage must lie inside the file. H5Dget_offset counts from the file's first byte,
  // a user block included (unlike HDF5's internal addresses), as file_bytes does. (libhdf5 1.10 refuses the first read past the
  // end, but then serves later reads of the same range from a buffer it never filled.)
  const haddr_t offset = H5Dget_offset(dataset);
  if (offset != HADDR_UNDEF && static_cast<double>(offset) + stored > static_cast<double>(file_bytes))
    fail(std::string("/") + name + " is stored at bytes [" + claimed_bytes(static_cast<double>(offset)) + ", " +
         claimed_bytes(static_cast<double>(offset) + stored) + "), past the end of the file (" +
         std::to_string(file_bytes) + " bytes)");
  if (filters > 0 && (stored > static_cast<double>(file_bytes) || declared > kMaxExpansion * stored))
    fail(std::string("/") + name + " declares " + claimed_bytes(declared) + " bytes from " + claimed_bytes(stored) +
         " bytes of compressed storage in the file (" + std::to_string(file_bytes) +
         " bytes): incomplete, or more than " + claimed_bytes(kMaxExpansion) + " times expanded");
}

}  // namespace blockmm::io::hdf5
