// The HDF5 BSR reader declared in hdf5_bsr.hpp, validation included (the writers are in
// hdf5_bsr_write.cpp, the part files of a parted output in hdf5_parts.cpp).
#include "io/hdf5_bsr.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "io/hdf5_checks.hpp"
#include "io/hdf5_parts.hpp"
#include "io/hdf5_support.hpp"
#include "io/library_guard.hpp"
#include "io/output_parts.hpp"

namespace blockmm::io {
namespace {

using hdf5::Handle;
using hdf5::claimed_bytes;
using hdf5::printable;
using hdf5::shape_text;

constexpr char kFormat[] = "blockmm-bsr";
constexpr std::int64_t kVersion = 1;
// Reads move at most this many bytes of values at a time: bounded staging memory.
constexpr std::int64_t kReadPieceBytes = std::int64_t{32} << 20;

hid_t native_value_type(ValueWidth width) { return width == ValueWidth::u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32; }

}  // namespace

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
  std::unique_ptr<hdf5::CheckedFile> checks;
  std::unique_ptr<BsrParts> parts;  // a parted output's part files (hdf5_parts.hpp)

  void open(BsrValues accepted);
  ValueWidth check_value_type(BsrValues accepted) const;
  void read_indptr(Handle& dataset);
  void check_indptr_chunks(hid_t dataset) const;
  [[noreturn]] void bad_index(std::int64_t block, std::int64_t j, std::int64_t row, std::int64_t previous) const;
  // Block-columns (as int64) and, where `values` is not null, values of blocks [first, first +
  // count), from the file's datasets or from its parts.
  void read_blocks(std::int64_t first, std::int64_t count, std::int64_t* cols, void* values) const;
};

ValueWidth BsrReader::Impl::check_value_type(BsrValues accepted) const {
  Handle type(H5Dget_type(data.get()), H5Tclose);
  if (!type.valid()) checks->fail_hdf5("cannot read the type of /data");
  const bool is_unsigned = H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE;
  if (is_unsigned) checks->check_plain_integer(type.get(), "/data");
  const std::size_t size = H5Tget_size(type.get());
  if (is_unsigned && size == 2) return ValueWidth::u16;
  if (is_unsigned && size == 4 && accepted == BsrValues::input_or_product) return ValueWidth::u32;
  const std::string found = hdf5::describe_type(type.get());
  if (accepted == BsrValues::input && is_unsigned && size == 4)
    checks->fail("/data holds unsigned 32-bit integers, as a blockmm product does; input matrices need unsigned 16-bit "
         "integers (uint16)");
  if (accepted == BsrValues::input)
    checks->fail("/data has type " + found + "; input matrices need unsigned 16-bit integers (uint16)");
  checks->fail("/data has type " + found + "; it must hold unsigned 16-bit (input) or 32-bit (product) integers");
}

// A chunked /indptr is decompressed one whole chunk at a time by libhdf5, whatever part of it is
// read: a chunk may hold at most this much, so that reading it in pieces bounds the memory.
constexpr std::int64_t kMaxIndptrChunkBytes = std::int64_t{64} << 20;
// /indptr is read and checked this many entries at a time (1 MiB).
constexpr std::int64_t kIndptrPieceEntries = std::int64_t{1} << 17;

void BsrReader::Impl::check_indptr_chunks(hid_t dataset) const {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!plist.valid()) checks->fail_hdf5("cannot read the storage of /indptr");
  const H5D_layout_t layout = H5Pget_layout(plist.get());
  if (layout < 0) checks->fail_hdf5("cannot read the storage of /indptr");
  if (layout != H5D_CHUNKED) return;
  hsize_t chunk = 0;
  if (H5Pget_chunk(plist.get(), 1, &chunk) != 1) checks->fail_hdf5("cannot read the chunk shape of /indptr");
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (!type.valid()) checks->fail_hdf5("cannot read the type of /indptr");
  const double bytes = static_cast<double>(chunk) * static_cast<double>(H5Tget_size(type.get()));
  if (bytes > static_cast<double>(kMaxIndptrChunkBytes))
    checks->fail("/indptr is stored in chunks of " + claimed_bytes(bytes) +
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
    checks->read_hyperslab(dataset.get(), "indptr", H5T_NATIVE_INT64, {static_cast<hsize_t>(first)},
                   {static_cast<hsize_t>(count)}, piece.data());
    for (std::int64_t e = 0; e < count; ++e) {
      const std::int64_t i = first + e;  // the entry's index: the start of block-row i
      const std::int64_t value = piece[static_cast<std::size_t>(e)];
      if (i == 0 && value != 0) checks->fail("/indptr[0] = " + std::to_string(value) + "; it must be 0");
      if (value < previous)
        checks->fail("/indptr decreases at block-row " + std::to_string(i - 1) + ": indptr[" + std::to_string(i - 1) +
             "] = " + std::to_string(previous) + " > indptr[" + std::to_string(i) + "] = " + std::to_string(value));
      if (value > header.nnzb)
        checks->fail("/indptr[" + std::to_string(i) + "] = " + std::to_string(value) + " exceeds nnzb = " +
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
    checks->fail("/indptr[" + std::to_string(p) + "] = " + std::to_string(previous) + "; it must equal nnzb = " +
         std::to_string(header.nnzb));
}

void BsrReader::Impl::bad_index(std::int64_t block, std::int64_t j, std::int64_t row, std::int64_t previous) const {
  const std::string where = "/indices[" + std::to_string(block) + "] = " + std::to_string(j) + " (block-row " +
                            std::to_string(row) + ")";
  const std::int32_t p = header.block_rows();
  if (j < 0 || j >= p) checks->fail(where + " is outside [0, " + std::to_string(p) + ")");
  if (j == previous)
    checks->fail(where + " repeats /indices[" + std::to_string(block - 1) + "]: duplicate block (" + std::to_string(row) + ", " +
         std::to_string(j) + ")");
  checks->fail(where + " is below /indices[" + std::to_string(block - 1) + "] = " + std::to_string(previous) +
       ": block-columns must ascend within a row");
}

void BsrReader::Impl::read_blocks(std::int64_t first, std::int64_t count, std::int64_t* cols, void* values) const {
  if (parts != nullptr) {
    parts->read(first, count, cols, values);
    return;
  }
  checks->read_hyperslab(indices.get(), "indices", H5T_NATIVE_INT64, {static_cast<hsize_t>(first)},
                         {static_cast<hsize_t>(count)}, cols);
  if (values == nullptr) return;
  const auto m = static_cast<hsize_t>(header.m);
  checks->read_hyperslab(data.get(), "data", native_value_type(header.width), {static_cast<hsize_t>(first), 0, 0},
                         {static_cast<hsize_t>(count), m, m}, values);
}

void BsrReader::Impl::open(BsrValues accepted) {
  hdf5::silence_errors();
  const LibraryGuard guard(path, "libhdf5", "reading the file's structure");
  Handle fapl = hdf5::file_access(true);
  file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) throw InputError(path + ": cannot open as an HDF5 file" + hdf5::error_detail());
  checks = std::make_unique<hdf5::CheckedFile>(
      path, file.get(), "a blockmm BSR file has attributes format = \"blockmm-bsr\", version = 1, n, m, nnzb",
      "a BSR file has /indptr, /indices and /data");
  const hdf5::CheckedFile& c = *checks;

  const std::string format = c.string_attribute("format");
  if (format != kFormat) c.fail("root attribute format = \"" + printable(format) + "\"; expected \"" + kFormat + "\"");
  const std::int64_t version = c.int_attribute("version");
  if (version != kVersion)
    c.fail("root attribute version = " + std::to_string(version) + "; this blockmm reads version " +
         std::to_string(kVersion));
  const std::int64_t n = c.int_attribute("n");
  const std::int64_t m = c.int_attribute("m");
  const std::int64_t nnzb = c.int_attribute("nnzb");
  constexpr std::int64_t kMaxOrder = std::numeric_limits<std::int32_t>::max();
  if (n <= 0 || n > kMaxOrder)
    c.fail("root attribute n = " + std::to_string(n) + " must lie in [1, " + std::to_string(kMaxOrder) + "]");
  if (m <= 0 || m > n) c.fail("root attribute m = " + std::to_string(m) + " must lie in [1, n = " + std::to_string(n) + "]");
  if (m > kMaxBlockOrder)
    c.fail("root attribute m = " + std::to_string(m) + " exceeds the largest block order blockmm supports, " +
           std::to_string(kMaxSupportedBlockOrder));
  if (n % m != 0) c.fail("root attribute n = " + std::to_string(n) + " is not a multiple of m = " + std::to_string(m));
  const std::int64_t p = n / m;
  if (nnzb < 0 || nnzb > p * p)
    c.fail("root attribute nnzb = " + std::to_string(nnzb) + " must lie in [0, (n/m)^2 = " + std::to_string(p * p) + "]");
  header.n = static_cast<std::int32_t>(n);
  header.m = static_cast<std::int32_t>(m);
  header.nnzb = nnzb;

  // A parted output (docs/output.md): /indices and /data are virtual datasets over its part files.
  std::int64_t parted = 0;
  if (c.has_attribute("parts")) {
    parted = c.int_attribute("parts");
    if (parted < 2 || parted > kMaxOutputParts)
      c.fail("root attribute parts = " + std::to_string(parted) + " must lie in [2, " + std::to_string(kMaxOutputParts) + "]");
  }
  Handle indptr_set = c.open_dataset("indptr");
  indices = c.open_dataset("indices", parted > 0);
  data = c.open_dataset("data", parted > 0);
  c.check_integer_type(indptr_set.get(), "indptr", "int64");
  c.check_integer_type(indices.get(), "indices", "int32");
  header.width = check_value_type(accepted);

  const std::vector<hsize_t> indptr_dims = c.dims_of(indptr_set.get(), "indptr");
  if (indptr_dims != std::vector<hsize_t>{static_cast<hsize_t>(p + 1)})
    c.fail("/indptr has shape " + shape_text(indptr_dims) + "; it must be (n/m + 1,) = (" + std::to_string(p + 1) + ",)");
  const std::vector<hsize_t> indices_dims = c.dims_of(indices.get(), "indices");
  if (indices_dims != std::vector<hsize_t>{static_cast<hsize_t>(nnzb)})
    c.fail("/indices has shape " + shape_text(indices_dims) + "; it must be (nnzb,) = (" + std::to_string(nnzb) + ",)");
  const std::vector<hsize_t> data_dims = c.dims_of(data.get(), "data");
  const std::vector<hsize_t> data_wanted = {static_cast<hsize_t>(nnzb), static_cast<hsize_t>(m),
                                            static_cast<hsize_t>(m)};
  if (data_dims != data_wanted)
    c.fail("/data has shape " + shape_text(data_dims) + "; it must be (nnzb, m, m) = " + shape_text(data_wanted));

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) c.fail("cannot stat");
  c.check_stored(indptr_set.get(), "indptr", static_cast<std::int64_t>(st.st_size));
  if (parted > 0) {
    parts = std::make_unique<BsrParts>(path, c, indices.get(), data.get(), header, parted);
  } else {
    c.check_stored(indices.get(), "indices", static_cast<std::int64_t>(st.st_size));
    c.check_stored(data.get(), "data", static_cast<std::int64_t>(st.st_size));
  }
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
  if (first > f.row_first[at]) f.read_blocks(first - 1, 1, &previous, nullptr);

  const std::int64_t per_piece = std::max<std::int64_t>(1, kReadPieceBytes / std::max<std::int64_t>(1, value_bytes));
  std::vector<std::int64_t> cols;
  std::vector<std::byte> values;
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t c = std::min(per_piece, count - done);
    const std::int64_t b0 = first + done;
    cols.resize(static_cast<std::size_t>(c));
    values.resize(static_cast<std::size_t>(c * value_bytes));
    // Indices as int64 whatever their stored width: no value can wrap into range on the way in.
    f.read_blocks(b0, c, cols.data(), values.data());
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

}  // namespace blockmm::io
