// The HDF5 BSR reader (validation included) and writer declared in hdf5_bsr.hpp.
#include "io/hdf5_bsr.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "io/hdf5_support.hpp"
#include "io/library_guard.hpp"

// Raw contents are written as host bytes into datasets declared little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "blockmm's file formats assume a little-endian host");

namespace blockmm::io {
namespace {

using hdf5::Handle;

constexpr char kFormat[] = "blockmm-bsr";
constexpr std::int64_t kVersion = 1;
// Reads and writes move at most this many bytes of values at a time: bounded staging memory.
constexpr std::int64_t kReadPieceBytes = std::int64_t{32} << 20;
constexpr std::int64_t kWritePieceBytes = std::int64_t{8} << 20;

// Text from the file, fit for a one-line message: control and non-ASCII bytes as \xHH, and short.
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

hid_t native_value_type(ValueWidth width) {
  return width == ValueWidth::u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reading

struct BsrReader::Impl {
  std::string path;
  BsrHeader header;
  // The non-empty block-rows and the first block of each, both ascending: at most nnzb of each,
  // so memory follows the blocks stored, never p (/indptr holds p + 1 entries whatever the blocks).
  std::vector<std::int32_t> rows;
  std::vector<std::int64_t> row_first;
  Handle file;
  Handle indices;
  Handle data;

  [[noreturn]] void fail(const std::string& what) const { throw InputError(path + ": " + what); }
  [[noreturn]] void fail_hdf5(const std::string& what) const { fail(what + hdf5::error_detail()); }

  void open(BsrValues accepted);
  Handle open_attribute(const char* name) const;
  std::int64_t int_attribute(const char* name) const;
  std::string string_attribute(const char* name) const;
  Handle open_dataset(const char* name) const;
  std::vector<hsize_t> dims_of(hid_t dataset, const char* name) const;
  void check_integer_type(hid_t dataset, const char* name, const char* wanted) const;
  void check_plain_integer(hid_t type, const std::string& what) const;
  ValueWidth check_value_type(BsrValues accepted) const;
  void check_stored(hid_t dataset, const char* name, std::int64_t file_bytes) const;
  void read_indptr(Handle& dataset);
  void check_indptr_chunks(hid_t dataset) const;
  [[noreturn]] void bad_index(std::int64_t block, std::int64_t j, std::int64_t row, std::int64_t previous) const;
  void read_hyperslab(hid_t dataset, const char* name, hid_t memory_type, const std::vector<hsize_t>& start,
                      const std::vector<hsize_t>& count, void* destination) const;
};

Handle BsrReader::Impl::open_attribute(const char* name) const {
  const htri_t exists = H5Aexists(file.get(), name);
  if (exists < 0) fail_hdf5(std::string("cannot look up the root attribute '") + name + "'");
  if (exists == 0)
    fail(std::string("missing root attribute '") + name +
         "' (a blockmm BSR file has attributes format = \"blockmm-bsr\", version = 1, n, m, nnzb)");
  Handle attribute(H5Aopen(file.get(), name, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) fail_hdf5(std::string("cannot open the root attribute '") + name + "'");
  Handle space(H5Aget_space(attribute.get()), H5Sclose);
  if (!space.valid()) fail_hdf5(std::string("cannot read the shape of the root attribute '") + name + "'");
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1)
    fail(std::string("root attribute '") + name + "' holds " + std::to_string(points) + " values; it must hold one");
  return attribute;
}

std::int64_t BsrReader::Impl::int_attribute(const char* name) const {
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

std::string BsrReader::Impl::string_attribute(const char* name) const {
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
      const LibraryGuard guard(path, "libhdf5", std::string("reading the root attribute '") + name + "'",
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

Handle BsrReader::Impl::open_dataset(const char* name) const {
  const htri_t exists = H5Lexists(file.get(), name, H5P_DEFAULT);
  if (exists < 0) fail_hdf5(std::string("cannot look up /") + name);
  if (exists == 0) fail(std::string("missing dataset /") + name + " (a BSR file has /indptr, /indices and /data)");
  // Only the file's own datasets are read: a link to another file (or to another name) would read
  // whatever file it names as matrix values. Checked before anything follows the link.
  H5L_info_t link {};
  if (H5Lget_info(file.get(), name, &link, H5P_DEFAULT) < 0) fail_hdf5(std::string("cannot look up /") + name);
  if (link.type == H5L_TYPE_EXTERNAL)
    fail(std::string("/") + name + " is an external link (to a dataset in another file); blockmm reads only datasets "
                                   "stored in the file itself");
  if (link.type != H5L_TYPE_HARD)
    fail(std::string("/") + name + (link.type == H5L_TYPE_SOFT ? " is a soft link" : " is a user-defined link") +
         "; blockmm reads only datasets stored under their own name");
  {
    // H5Oopen + H5Iget_type: the same in HDF5 1.8 to 1.14 (H5Oget_info changed signature twice).
    Handle object(H5Oopen(file.get(), name, H5P_DEFAULT), H5Oclose);
    if (!object.valid()) fail_hdf5(std::string("cannot open /") + name);
    if (H5Iget_type(object.get()) != H5I_DATASET) fail(std::string("/") + name + " is not a dataset");
  }
  Handle dataset(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) fail_hdf5(std::string("cannot open the dataset /") + name);
  // Values kept in other files (external raw storage, virtual datasets) would be read from
  // whatever those names point at, a FIFO included (which blocks for ever): refused before any read.
  Handle plist(H5Dget_create_plist(dataset.get()), H5Pclose);
  if (!plist.valid()) fail_hdf5(std::string("cannot read the storage of /") + name);
  const H5D_layout_t layout = H5Pget_layout(plist.get());
  if (layout < 0) fail_hdf5(std::string("cannot read the storage of /") + name);
  if (layout == H5D_VIRTUAL)
    fail(std::string("/") + name + " is a virtual dataset (its values live in other datasets or files); blockmm reads "
                                   "only values stored in the file itself");
  const int external = H5Pget_external_count(plist.get());
  if (external < 0) fail_hdf5(std::string("cannot read the storage of /") + name);
  if (external > 0)
    fail(std::string("/") + name + " keeps its values in an external file (" + std::to_string(external) +
         " external storage entries); blockmm reads only values stored in the file itself");
  return dataset;
}

std::vector<hsize_t> BsrReader::Impl::dims_of(hid_t dataset, const char* name) const {
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
void BsrReader::Impl::check_plain_integer(hid_t type, const std::string& what) const {
  const std::size_t size = H5Tget_size(type);
  const std::size_t precision = H5Tget_precision(type);
  const int offset = H5Tget_offset(type);
  if ((size != 1 && size != 2 && size != 4 && size != 8) || precision != 8 * size || offset != 0)
    fail(what + " is an integer type of " + std::to_string(size) + " bytes with " + std::to_string(precision) +
         " significant bits at bit offset " + std::to_string(offset) +
         "; only plain 8-, 16-, 32- or 64-bit integers are read");
}

void BsrReader::Impl::check_integer_type(hid_t dataset, const char* name, const char* wanted) const {
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (!type.valid()) fail_hdf5(std::string("cannot read the type of /") + name);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    fail(std::string("/") + name + " has type " + hdf5::describe_type(type.get()) + "; it must be an integer type (" +
         wanted + ")");
  check_plain_integer(type.get(), std::string("/") + name);
}

ValueWidth BsrReader::Impl::check_value_type(BsrValues accepted) const {
  Handle type(H5Dget_type(data.get()), H5Tclose);
  if (!type.valid()) fail_hdf5("cannot read the type of /data");
  const bool is_unsigned = H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE;
  if (is_unsigned) check_plain_integer(type.get(), "/data");
  const std::size_t size = H5Tget_size(type.get());
  if (is_unsigned && size == 2) return ValueWidth::u16;
  if (is_unsigned && size == 4 && accepted == BsrValues::input_or_product) return ValueWidth::u32;
  const std::string found = hdf5::describe_type(type.get());
  if (accepted == BsrValues::input && is_unsigned && size == 4)
    fail("/data holds unsigned 32-bit integers, as a blockmm product does; input matrices need unsigned 16-bit "
         "integers (uint16)");
  if (accepted == BsrValues::input)
    fail("/data has type " + found + "; input matrices need unsigned 16-bit integers (uint16)");
  fail("/data has type " + found + "; it must hold unsigned 16-bit (input) or 32-bit (product) integers");
}

void BsrReader::Impl::read_hyperslab(hid_t dataset, const char* name, hid_t memory_type,
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
// file holds (DESIGN.md §1): a dataset that was never written reads as fill values, so a file of
// a few hundred bytes could otherwise declare (and have blockmm allocate) billions of entries.
// An uncompressed dataset must have all of its bytes stored in the file; a compressed one may
// expand at most kMaxExpansion times (deflate tops out near 1032).
void BsrReader::Impl::check_stored(hid_t dataset, const char* name, std::int64_t file_bytes) const {
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

// A chunked /indptr is decompressed one whole chunk at a time by libhdf5, whatever part of it is
// read: a chunk may hold at most this much, so that reading it in pieces bounds the memory.
constexpr std::int64_t kMaxIndptrChunkBytes = std::int64_t{64} << 20;
// /indptr is read and checked this many entries at a time (1 MiB).
constexpr std::int64_t kIndptrPieceEntries = std::int64_t{1} << 17;

void BsrReader::Impl::check_indptr_chunks(hid_t dataset) const {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!plist.valid()) fail_hdf5("cannot read the storage of /indptr");
  const H5D_layout_t layout = H5Pget_layout(plist.get());
  if (layout < 0) fail_hdf5("cannot read the storage of /indptr");
  if (layout != H5D_CHUNKED) return;
  hsize_t chunk = 0;
  if (H5Pget_chunk(plist.get(), 1, &chunk) != 1) fail_hdf5("cannot read the chunk shape of /indptr");
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (!type.valid()) fail_hdf5("cannot read the type of /indptr");
  const double bytes = static_cast<double>(chunk) * static_cast<double>(H5Tget_size(type.get()));
  if (bytes > static_cast<double>(kMaxIndptrChunkBytes))
    fail("/indptr is stored in chunks of " + claimed_bytes(bytes) +
         " bytes; blockmm reads chunks of at most " + std::to_string(kMaxIndptrChunkBytes) +
         " bytes (libhdf5 expands a whole chunk to read any part of it)");
}

// Read and checked in pieces (0 first, never decreasing, never above nnzb, nnzb last); only the
// rows that hold blocks are kept. The entries' bounds come before any row is kept, so a
// compressed /indptr of p + 1 entries costs memory by the blocks it points at, not by p.
void BsrReader::Impl::read_indptr(Handle& dataset) {
  check_indptr_chunks(dataset.get());
  const std::int64_t p = header.block_rows();
  std::vector<std::int64_t> piece(static_cast<std::size_t>(std::min(p + 1, kIndptrPieceEntries)));
  std::int64_t previous = 0;
  for (std::int64_t first = 0; first <= p;) {
    const std::int64_t count = std::min(kIndptrPieceEntries, p + 1 - first);
    read_hyperslab(dataset.get(), "indptr", H5T_NATIVE_INT64, {static_cast<hsize_t>(first)},
                   {static_cast<hsize_t>(count)}, piece.data());
    for (std::int64_t e = 0; e < count; ++e) {
      const std::int64_t i = first + e;  // the entry's index: the start of block-row i
      const std::int64_t value = piece[static_cast<std::size_t>(e)];
      if (i == 0 && value != 0) fail("/indptr[0] = " + std::to_string(value) + "; it must be 0");
      if (value < previous)
        fail("/indptr decreases at block-row " + std::to_string(i - 1) + ": indptr[" + std::to_string(i - 1) +
             "] = " + std::to_string(previous) + " > indptr[" + std::to_string(i) + "] = " + std::to_string(value));
      if (value > header.nnzb)
        fail("/indptr[" + std::to_string(i) + "] = " + std::to_string(value) + " exceeds nnzb = " +
             std::to_string(header.nnzb));
      if (i > 0 && value > previous) {  // block-row i - 1 holds blocks [previous, value)
        rows.push_back(static_cast<std::int32_t>(i - 1));
        row_first.push_back(previous);
      }
      previous = value;
    }
    first += count;
  }
  if (previous != header.nnzb)
    fail("/indptr[" + std::to_string(p) + "] = " + std::to_string(previous) + "; it must equal nnzb = " +
         std::to_string(header.nnzb));
}

void BsrReader::Impl::bad_index(std::int64_t block, std::int64_t j, std::int64_t row, std::int64_t previous) const {
  const std::string where = "/indices[" + std::to_string(block) + "] = " + std::to_string(j) + " (block-row " +
                            std::to_string(row) + ")";
  const std::int32_t p = header.block_rows();
  if (j < 0 || j >= p) fail(where + " is outside [0, " + std::to_string(p) + ")");
  if (j == previous)
    fail(where + " repeats /indices[" + std::to_string(block - 1) + "]: duplicate block (" + std::to_string(row) + ", " +
         std::to_string(j) + ")");
  fail(where + " is below /indices[" + std::to_string(block - 1) + "] = " + std::to_string(previous) +
       ": block-columns must ascend within a row");
}

void BsrReader::Impl::open(BsrValues accepted) {
  hdf5::silence_errors();
  const LibraryGuard guard(path, "libhdf5", "reading the file's structure");
  Handle fapl = hdf5::file_access(true);
  file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) fail_hdf5("cannot open as an HDF5 file");

  const std::string format = string_attribute("format");
  if (format != kFormat) fail("root attribute format = \"" + printable(format) + "\"; expected \"" + kFormat + "\"");
  const std::int64_t version = int_attribute("version");
  if (version != kVersion)
    fail("root attribute version = " + std::to_string(version) + "; this blockmm reads version " +
         std::to_string(kVersion));
  const std::int64_t n = int_attribute("n");
  const std::int64_t m = int_attribute("m");
  const std::int64_t nnzb = int_attribute("nnzb");
  constexpr std::int64_t kMaxOrder = std::numeric_limits<std::int32_t>::max();
  if (n <= 0 || n > kMaxOrder)
    fail("root attribute n = " + std::to_string(n) + " must lie in [1, " + std::to_string(kMaxOrder) + "]");
  if (m <= 0 || m > n) fail("root attribute m = " + std::to_string(m) + " must lie in [1, n = " + std::to_string(n) + "]");
  if (m > kMaxBlockOrder)
    fail("root attribute m = " + std::to_string(m) + " is too large: a block of m*m values would not fit in 2^63 bytes (m <= " +
         std::to_string(kMaxBlockOrder) + ")");
  if (n % m != 0) fail("root attribute n = " + std::to_string(n) + " is not a multiple of m = " + std::to_string(m));
  const std::int64_t p = n / m;
  if (nnzb < 0 || nnzb > p * p)
    fail("root attribute nnzb = " + std::to_string(nnzb) + " must lie in [0, (n/m)^2 = " + std::to_string(p * p) + "]");
  header.n = static_cast<std::int32_t>(n);
  header.m = static_cast<std::int32_t>(m);
  header.nnzb = nnzb;

  Handle indptr_set = open_dataset("indptr");
  indices = open_dataset("indices");
  data = open_dataset("data");
  check_integer_type(indptr_set.get(), "indptr", "int64");
  check_integer_type(indices.get(), "indices", "int32");
  header.width = check_value_type(accepted);

  const std::vector<hsize_t> indptr_dims = dims_of(indptr_set.get(), "indptr");
  if (indptr_dims != std::vector<hsize_t>{static_cast<hsize_t>(p + 1)})
    fail("/indptr has shape " + shape_text(indptr_dims) + "; it must be (n/m + 1,) = (" + std::to_string(p + 1) + ",)");
  const std::vector<hsize_t> indices_dims = dims_of(indices.get(), "indices");
  if (indices_dims != std::vector<hsize_t>{static_cast<hsize_t>(nnzb)})
    fail("/indices has shape " + shape_text(indices_dims) + "; it must be (nnzb,) = (" + std::to_string(nnzb) + ",)");
  const std::vector<hsize_t> data_dims = dims_of(data.get(), "data");
  const std::vector<hsize_t> data_wanted = {static_cast<hsize_t>(nnzb), static_cast<hsize_t>(m),
                                            static_cast<hsize_t>(m)};
  if (data_dims != data_wanted)
    fail("/data has shape " + shape_text(data_dims) + "; it must be (nnzb, m, m) = " + shape_text(data_wanted));

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("cannot stat");
  check_stored(indptr_set.get(), "indptr", static_cast<std::int64_t>(st.st_size));
  check_stored(indices.get(), "indices", static_cast<std::int64_t>(st.st_size));
  check_stored(data.get(), "data", static_cast<std::int64_t>(st.st_size));
  read_indptr(indptr_set);
}

BsrReader::BsrReader(const std::string& path, BsrValues accepted) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->open(accepted);
}

BsrReader::~BsrReader() = default;

const std::string& BsrReader::path() const { return impl_->path; }
const BsrHeader& BsrReader::header() const { return impl_->header; }
std::vector<std::int64_t> BsrReader::indptr() const {
  const Impl& f = *impl_;
  std::vector<std::int64_t> out(static_cast<std::size_t>(f.header.block_rows()) + 1, f.header.nnzb);
  std::size_t next = 0;  // the first non-empty row at or after row i
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    while (next < f.rows.size() && static_cast<std::size_t>(f.rows[next]) < i) ++next;
    out[i] = next < f.rows.size() ? f.row_first[next] : f.header.nnzb;
  }
  return out;
}

std::vector<std::byte> BsrReader::read_records(std::int64_t first, std::int64_t count) {
  Impl& f = *impl_;
  hdf5::silence_errors();
  const LibraryGuard guard(f.path, "libhdf5", "reading blocks");
  const BsrHeader& h = f.header;
  if (first < 0 || count < 0 || first + count > h.nnzb)
    throw Error(ExitCode::other, f.path + ": internal error: blocks [" + std::to_string(first) + ", " +
                                     std::to_string(first + count) + ") requested of " + std::to_string(h.nnzb));
  const std::int64_t stride = h.record_bytes();
  const std::int64_t value_bytes = static_cast<std::int64_t>(h.width) * h.block_values();
  std::vector<std::byte> records(static_cast<std::size_t>(count * stride));
  if (count == 0) return records;

  const std::int32_t p = h.block_rows();
  // The row of block `first`: the last non-empty row starting at or before it.
  std::size_t at = static_cast<std::size_t>(std::upper_bound(f.row_first.begin(), f.row_first.end(), first) -
                                            f.row_first.begin() - 1);
  std::int64_t previous = -1;  // block-column of the block before, when it is in the same row
  if (first > f.row_first[at])
    f.read_hyperslab(f.indices.get(), "indices", H5T_NATIVE_INT64, {static_cast<hsize_t>(first - 1)}, {1}, &previous);

  const std::int64_t per_piece = std::max<std::int64_t>(1, kReadPieceBytes / std::max<std::int64_t>(1, value_bytes));
  std::vector<std::int64_t> cols;
  std::vector<std::byte> values;
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t c = std::min(per_piece, count - done);
    const std::int64_t b0 = first + done;
    cols.resize(static_cast<std::size_t>(c));
    values.resize(static_cast<std::size_t>(c * value_bytes));
    // Indices as int64 whatever their stored width: no value can wrap into range on the way in.
    f.read_hyperslab(f.indices.get(), "indices", H5T_NATIVE_INT64, {static_cast<hsize_t>(b0)},
                     {static_cast<hsize_t>(c)}, cols.data());
    f.read_hyperslab(f.data.get(), "data", native_value_type(h.width),
                     {static_cast<hsize_t>(b0), 0, 0},
                     {static_cast<hsize_t>(c), static_cast<hsize_t>(h.m), static_cast<hsize_t>(h.m)}, values.data());
    for (std::int64_t t = 0; t < c; ++t) {
      const std::int64_t b = b0 + t;
      while (at + 1 < f.row_first.size() && f.row_first[at + 1] <= b) ++at;
      const std::int64_t row = f.rows[at];
      if (b == f.row_first[at]) previous = -1;  // first block of its row
      const std::int64_t j = cols[t];
      if (j < 0 || j >= p || j <= previous) f.bad_index(b, j, row, previous);
      previous = j;
      std::byte* record = records.data() + (done + t) * stride;
      set_record_index(record, static_cast<std::int32_t>(row), static_cast<std::int32_t>(j));
      std::memcpy(record + 8, values.data() + t * value_bytes, static_cast<std::size_t>(value_bytes));
    }
    done += c;
  }
  return records;
}

// ---------------------------------------------------------------------------------------------
// Writing

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

  void create() {
    Handle fapl = hdf5::file_access(false);  // the temporary file is ours alone
    if (!fapl.valid()) fail("cannot prepare HDF5 file access");
    // A character device (/dev/null for a timing run) is written in place and cannot hold HDF5's
    // metadata (HDF5 sizes its file at close): lay the file out in memory, where the offsets come
    // out the same, and let only the raw contents go to the device.
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0)
      fail("cannot prepare an in-memory HDF5 layout for the device " + path_);
    file_ = Handle(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
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

BsrLayout create_bsr_file(const std::string& path, const std::string& shown, const BsrHeader& header,
                          std::int64_t* metadata_bytes) {
  hdf5::silence_errors();
  const auto p = static_cast<hsize_t>(header.block_rows());
  const auto k = static_cast<hsize_t>(header.nnzb);
  const auto m = static_cast<hsize_t>(header.m);
  Creator file(path, shown);
  file.create();
  file.string_attribute("format", kFormat);
  file.int_attribute("version", kVersion);
  file.int_attribute("n", header.n);
  file.int_attribute("m", header.m);
  file.int_attribute("nnzb", header.nnzb);
  BsrLayout layout;
  layout.indptr = file.dataset("indptr", H5T_STD_I64LE, {p + 1});
  layout.indices = file.dataset("indices", H5T_STD_I32LE, {k});
  layout.data = file.dataset("data", header.width == ValueWidth::u16 ? H5T_STD_U16LE : H5T_STD_U32LE, {k, m, m});
  file.close();

  // HDF5 sets the file's end past all allocated storage at close; the readers check it.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw OutputError(shown + ": cannot stat " + path + " after creating it");
  const std::int64_t raw = 8 * static_cast<std::int64_t>(p + 1) + header.nnzb * (4 + static_cast<std::int64_t>(header.width) * header.block_values());
  if (metadata_bytes != nullptr) *metadata_bytes = std::max<std::int64_t>(0, static_cast<std::int64_t>(st.st_size) - raw);
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

void BsrContentWriter::write_records(std::int64_t first_block, std::int64_t count, const std::byte* records) {
  if (count == 0) return;
  if (first_block < 0 || first_block + count > header_.nnzb)
    throw Error(ExitCode::other, "internal error: blocks [" + std::to_string(first_block) + ", " +
                                     std::to_string(first_block + count) + ") outside the file's " +
                                     std::to_string(header_.nnzb));
  const std::int64_t value_bytes = static_cast<std::int64_t>(header_.width) * header_.block_values();
  const std::int64_t stride = 8 + value_bytes;
  const std::int64_t per_piece = std::max<std::int64_t>(1, kWritePieceBytes / value_bytes);
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t c = std::min(per_piece, count - done);
    cols_.resize(static_cast<std::size_t>(c));
    values_.resize(static_cast<std::size_t>(c * value_bytes));
    for (std::int64_t t = 0; t < c; ++t) {
      const std::byte* record = records + (done + t) * stride;
      cols_[t] = record_col(record);
      std::memcpy(values_.data() + t * value_bytes, record + 8, static_cast<std::size_t>(value_bytes));
    }
    const std::int64_t b0 = first_block + done;
    file_.write_at(layout_.indices + 4 * b0, cols_.data(), 4 * c);
    file_.write_at(layout_.data + value_bytes * b0, values_.data(), value_bytes * c);
    written_ += (4 + value_bytes) * c;
    done += c;
  }
}

}  // namespace blockmm::io
