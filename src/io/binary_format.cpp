#include "io/binary_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"

namespace blockmm::io {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string errno_text() { return std::strerror(errno); }

__extension__ typedef unsigned __int128 Wide;  // k * m^2 can pass 2^63

// Bytes that text is made of: printable ASCII, tab, line ends, and UTF-8's bytes >= 0x80.
bool text_bytes(const unsigned char* bytes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char c = bytes[i];
    if (!((c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == '\r')) return false;
  }
  return count > 0;
}

// "not a blockmm input" for a file that begins with text. Never a valid file: the 4 bytes of
// its header's m would all be >= 0x09, so m >= 0x09090909 or m < 0, both refused anyway.
[[noreturn]] void not_an_input(const std::string& path, const unsigned char* head, std::size_t count) {
  // Printable ASCII as is, any other byte as \xNN: the message stays one clean line.
  const std::string start =
      escape_control_characters(std::string(reinterpret_cast<const char*>(head), count), /*ascii_only=*/true);
  throw InputError(path + ": not a blockmm input (COL380 binary or HDF5): it begins with text \"" + start + "\"");
}

// Checks everything the header and the file size can tell; nothing is allocated from them.
void check_header(const BinaryFileInfo& f) {
  const FileHeader& h = f.header;
  const std::string& path = f.path;
  unsigned char head[kHeaderBytes];
  const std::int32_t fields[3] = {h.n, h.m, static_cast<std::int32_t>(h.k)};  // the bytes as read
  std::memcpy(head, fields, sizeof head);
  if (text_bytes(head, sizeof head)) not_an_input(path, head, sizeof head);
  if (h.n <= 0) throw InputError(path + ": header n = " + std::to_string(h.n) + " must be positive");
  if (h.m <= 0) throw InputError(path + ": header m = " + std::to_string(h.m) + " must be positive");
  // Where a record's size would not even fit int64: refused at once, naming the limit that
  // matters (the one every other m above it meets at the end).
  if (h.m > kMaxBlockOrder) check_supported_block_order(path, h.m);
  if (h.n % h.m != 0)
    throw InputError(path + ": header n = " + std::to_string(h.n) + " is not a multiple of m = " + std::to_string(h.m));
  if (h.k < 0) throw InputError(path + ": header k = " + std::to_string(h.k) + " is negative");
  const std::int64_t p = h.n / h.m;
  if (h.k > p * p)
    throw InputError(path + ": header k = " + std::to_string(h.k) + " exceeds (n/m)^2 = " + std::to_string(p * p) +
                     " possible blocks");
  const Wide record = 8 + static_cast<Wide>(f.width) * static_cast<Wide>(h.m) * static_cast<Wide>(h.m);
  const Wide expected = kHeaderBytes + static_cast<Wide>(h.k) * record;
  const Wide actual = static_cast<Wide>(f.file_bytes);
  if (expected != actual) {
    // The commonest mix-up: a product (uint32 values) given as an input. Say so, as blockmm-cmp does.
    const Wide product = kHeaderBytes + static_cast<Wide>(h.k) * (8 + 4 * static_cast<Wide>(h.m) * static_cast<Wide>(h.m));
    if (f.width == ValueWidth::u16 && h.k > 0 && product == actual)
      throw InputError(path + ": holds uint32 values (a product), not an input matrix of uint16 values (" + describe(h) +
                       ", " + std::to_string(f.file_bytes) + " bytes = 12 + k*(8+4*m^2))");
    const std::string rule = "12 + k*(8+" + std::to_string(static_cast<int>(f.width)) + "*m^2)";
    if (expected > actual) {
      const std::string need = expected > static_cast<Wide>(INT64_MAX) ? std::string("more than 2^63")
                                                                        : std::to_string(static_cast<std::int64_t>(expected));
      throw InputError(path + ": truncated: " + describe(h) + " needs " + rule + " = " + need + " bytes, file has " +
                       std::to_string(f.file_bytes));
    }
    throw InputError(path + ": " + std::to_string(static_cast<std::int64_t>(actual - expected)) +
                     " trailing bytes after the last record: " + describe(h) + " needs " + rule + " = " +
                     std::to_string(static_cast<std::int64_t>(expected)) + " bytes, file has " +
                     std::to_string(f.file_bytes));
  }
  check_supported_block_order(path, h.m);
}

}  // namespace

void check_supported_block_order(const std::string& path, std::int32_t m) {
  if (m > kMaxSupportedBlockOrder)
    throw InputError(path + ": m = " + std::to_string(m) + " exceeds the largest block order blockmm supports, " +
                     std::to_string(kMaxSupportedBlockOrder) + " (block indices r*m + c must fit int32; a block of " +
                     "m*m uint16 values stays below 4 GiB)");
}

namespace {

BinaryFileInfo read_header(const std::string& path) {
  Fd file;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait forever for a writer.
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd < 0) throw InputError(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw InputError(path + ": cannot stat: " + errno_text());
  if (S_ISDIR(st.st_mode)) throw InputError(path + ": is a directory");
  if (!S_ISREG(st.st_mode))
    throw InputError(path + ": is not a regular file (a pipe or device cannot be read at record offsets)");
  BinaryFileInfo info;
  info.path = path;
  info.file_bytes = static_cast<std::int64_t>(st.st_size);
  if (info.file_bytes < kHeaderBytes) {
    unsigned char head[kHeaderBytes] = {};
    const auto count = static_cast<std::size_t>(info.file_bytes);
    read_fully(file.fd, 0, head, info.file_bytes, path);
    if (text_bytes(head, count)) not_an_input(path, head, count);
    throw InputError(path + ": file is " + std::to_string(info.file_bytes) +
                     " bytes, shorter than the 12-byte header (int32 n, m, k)");
  }
  std::int32_t fields[3];
  read_fully(file.fd, 0, fields, sizeof fields, path);
  info.header = {fields[0], fields[1], fields[2]};
  return info;
}

}  // namespace

std::string describe(const FileHeader& h) {
  return "n = " + std::to_string(h.n) + ", m = " + std::to_string(h.m) + ", k = " + std::to_string(h.k);
}

std::optional<FileHeader> peek_binary_header(const std::string& path) {
  try {
    const FileHeader header = read_header(path).header;
    if (header.n > 0 && header.m > 0 && header.n % header.m == 0 && header.k >= 0) return header;
  } catch (const InputError&) {
  }
  return std::nullopt;
}

BinaryFileInfo inspect_binary(const std::string& path, ValueWidth width) {
  BinaryFileInfo info = read_header(path);
  info.width = width;
  check_header(info);
  return info;
}

BinaryFileInfo inspect_binary_any_width(const std::string& path) {
  BinaryFileInfo info = read_header(path);
  info.width = ValueWidth::u16;
  try {
    check_header(info);
    return info;
  } catch (const InputError&) {
  }
  info.width = ValueWidth::u32;
  try {
    check_header(info);
    return info;
  } catch (const InputError&) {
  }
  info.width = ValueWidth::u16;
  check_header(info);  // report the input rule's message
  return info;
}

void validate_record_indices(const BinaryFileInfo& file, const std::byte* bytes, std::int64_t first_record,
                             std::int64_t count) {
  const std::int32_t p = file.header.n / file.header.m;
  const std::int64_t stride = file.record_bytes();
  // Find the first bad record in parallel, then report it alone.
  std::int64_t first_bad = count;
#pragma omp parallel for reduction(min : first_bad) schedule(static) if (count >= (1 << 16))
  for (std::int64_t r = 0; r < count; ++r) {
    const std::byte* rec = bytes + r * stride;
    const std::int32_t i = record_row(rec);
    const std::int32_t j = record_col(rec);
    if (i < 0 || i >= p || j < 0 || j >= p) first_bad = std::min(first_bad, r);
  }
  if (first_bad == count) return;
  const std::byte* rec = bytes + first_bad * stride;
  const std::int64_t index = first_record + first_bad;
  const std::int32_t i = record_row(rec);
  const bool row_bad = i < 0 || i >= p;
  throw InputError(file.path + ": record " + std::to_string(index) + " (byte offset " +
                   std::to_string(file.record_offset(index)) + "): block-" + (row_bad ? "row " : "column ") +
                   std::to_string(row_bad ? i : record_col(rec)) + " outside [0, " + std::to_string(p) + ")");
}

RecordRange record_share(std::int64_t records, int rank, int ranks) {
  const std::int64_t first = records * rank / ranks;
  return {first, records * (rank + 1) / ranks - first};
}

InputRecords read_input_records(const BinaryFileInfo& file, FileReader& reader, RecordRange range) {
  InputRecords records;
  records.shape = file.header.shape();
  records.bytes.resize(static_cast<std::size_t>(range.count * file.record_bytes()));
  // Several threads copy from the page cache (and fault in the fresh buffer) at once: one
  // thread alone reads a cached file at a fraction of the memory bandwidth.
  const std::int64_t total = static_cast<std::int64_t>(records.bytes.size());
  const std::int64_t piece = std::int64_t{64} << 20;
  const std::int64_t pieces = (total + piece - 1) / piece;
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1 && reader.concurrent())
  for (std::int64_t c = 0; c < pieces; ++c) {
    try {
      const std::int64_t first = c * piece;
      reader.read_at(file.record_offset(range.first) + first, records.bytes.data() + first, std::min(piece, total - first));
    } catch (...) {
#pragma omp critical
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  validate_record_indices(file, records.bytes.data(), range.first, range.count);
  return records;
}

std::string locate_duplicate_records(const BinaryFileInfo& file, std::int32_t i, std::int32_t j) {
  Fd handle;
  handle.fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (handle.fd < 0) return "";
  const std::int64_t stride = file.record_bytes();
  const std::int64_t per_read = std::max<std::int64_t>(1, (std::int64_t{64} << 20) / stride);
  std::vector<std::byte> buffer;
  std::vector<std::int64_t> found;
  try {
    for (std::int64_t first = 0; first < file.header.k && found.size() < 2; first += per_read) {
      const std::int64_t count = std::min(per_read, file.header.k - first);
      buffer.resize(static_cast<std::size_t>(count * stride));
      read_fully(handle.fd, file.record_offset(first), buffer.data(), count * stride, file.path);
      for (std::int64_t r = 0; r < count && found.size() < 2; ++r) {
        const std::byte* rec = buffer.data() + r * stride;
        if (record_row(rec) == i && record_col(rec) == j) found.push_back(first + r);
      }
    }
  } catch (const Error&) {
    return "";
  }
  if (found.size() < 2) return "";
  return " at records " + std::to_string(found[0]) + " and " + std::to_string(found[1]) + " (byte offsets " +
         std::to_string(file.record_offset(found[0])) + " and " + std::to_string(file.record_offset(found[1])) + ")";
}

namespace {

template <typename Value>
RecordBuffer<Value> read_whole(const std::string& path, ValueWidth width) {
  const BinaryFileInfo info = inspect_binary(path, width);
  RecordBuffer<Value> records;
  records.shape = info.header.shape();
  records.bytes.resize(static_cast<std::size_t>(info.file_bytes - kHeaderBytes));
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) throw InputError(path + ": cannot open: " + errno_text());
  read_fully(file.fd, kHeaderBytes, records.bytes.data(), static_cast<std::int64_t>(records.bytes.size()), path);
  validate_record_indices(info, records.bytes.data(), 0, info.header.k);
  return records;
}

}  // namespace

InputRecords read_input_file(const std::string& path) { return read_whole<std::uint16_t>(path, ValueWidth::u16); }
OutputRecords read_output_file(const std::string& path) { return read_whole<std::uint32_t>(path, ValueWidth::u32); }

template <typename Value>
void write_binary_file(const std::string& path, const RecordBuffer<Value>& records) {
  const comm::Communicator single{comm::CommunicatorOptions{}};
  AtomicOutput output(path, single);
  {
    auto writer = output.open_writer();
    const std::int32_t header[3] = {records.shape.n, records.shape.m, static_cast<std::int32_t>(records.size())};
    writer->write_at(0, header, sizeof header);
    writer->write_at(kHeaderBytes, records.bytes.data(), static_cast<std::int64_t>(records.bytes.size()));
    writer->sync_and_close();
  }
  output.commit();
}

template void write_binary_file<std::uint16_t>(const std::string&, const RecordBuffer<std::uint16_t>&);
template void write_binary_file<std::uint32_t>(const std::string&, const RecordBuffer<std::uint32_t>&);

}  // namespace blockmm::io
