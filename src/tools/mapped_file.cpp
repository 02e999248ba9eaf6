#include "tools/mapped_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "io/file_access.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/input_file.hpp"

namespace blockmm::tools {

MappedFile::MappedFile(const io::BinaryFileInfo& info) : info_(info), stride_(info.record_bytes()) {
  const int fd = ::open(info.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(info.path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(info.path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || static_cast<std::int64_t>(st.st_size) != info.file_bytes)
    throw InputError(info.path + ": the file changed while being read (it had " + std::to_string(info.file_bytes) +
                     " bytes, now " + std::to_string(static_cast<long long>(st.st_size)) + ")");
  bytes_.resize(static_cast<std::size_t>(info.file_bytes));
  // Pieces on several threads: one thread alone copies a cached file at a fraction of the
  // memory bandwidth. A short read (the file shrank meanwhile) is an InputError.
  const std::int64_t total = info.file_bytes;
  const std::int64_t piece = std::int64_t{64} << 20;
  const std::int64_t pieces = (total + piece - 1) / piece;
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1)
  for (std::int64_t c = 0; c < pieces; ++c) {
    try {
      const std::int64_t first = c * piece;
      io::read_fully(fd, first, bytes_.data() + first, std::min(piece, total - first), info.path);
    } catch (...) {
#pragma omp critical(blockmm_loaded_file_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  io::validate_record_indices(info_, bytes_.data() + kHeaderBytes, 0, info_.header.k);
}

MappedFile::MappedFile(const io::BinaryFileInfo& info, LargeVector<std::byte> records)
    : info_(info), bytes_(std::move(records)), stride_(info.record_bytes()), hdf5_(true) {}

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, const io::ValueWidth* width) {
  if (!io::has_hdf5_signature(path))
    return std::make_unique<MappedFile>(io::inspect_binary_explained(path, width));
  io::BsrReader reader(path, io::BsrValues::input_or_product);
  const io::BsrHeader& h = reader.header();
  io::BinaryFileInfo info;
  info.path = path;
  info.header = {h.n, h.m, h.nnzb};
  info.width = h.width;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(path + ": cannot stat: " + std::strerror(errno));
  info.file_bytes = st.st_size;
  const std::int64_t stride = h.record_bytes();
  // A compressed dataset may claim far more blocks than its file holds: refuse before allocating.
  if (h.nnzb > (std::numeric_limits<std::int64_t>::max() - kHeaderBytes) / stride ||
      static_cast<std::uint64_t>(kHeaderBytes + h.nnzb * stride) > std::vector<std::byte>().max_size())
    throw ResourceError(path + ": " + std::to_string(h.nnzb) + " blocks of " + std::to_string(stride) +
                        " bytes are too many to load into memory");
  // The header bytes keep record(r)'s arithmetic the binary layout's and make heap_ never empty.
  LargeVector<std::byte> records(static_cast<std::size_t>(kHeaderBytes + h.nnzb * stride));
  const std::int64_t per_piece = std::max<std::int64_t>(1, (std::int64_t{32} << 20) / stride);
  for (std::int64_t first = 0; first < h.nnzb; first += per_piece) {
    const std::int64_t count = std::min(per_piece, h.nnzb - first);
    const std::vector<std::byte> piece = reader.read_records(first, count);
    std::memcpy(records.data() + kHeaderBytes + first * stride, piece.data(), piece.size());
  }
  return std::unique_ptr<MappedFile>(new MappedFile(info, std::move(records)));
}

std::string MappedFile::locate(std::int64_t r) const {
  if (is_hdf5()) return "block " + std::to_string(r) + " of /data";
  return "record " + std::to_string(r) + " (byte offset " + std::to_string(info_.record_offset(r)) + ")";
}

std::uint32_t MappedFile::value(std::int64_t r, std::int64_t e) const {
  const std::byte* at = record(r) + 8 + e * value_bytes();
  if (info_.width == io::ValueWidth::u16) {
    std::uint16_t v;
    std::memcpy(&v, at, 2);
    return v;
  }
  std::uint32_t v;
  std::memcpy(&v, at, 4);
  return v;
}

bool MappedFile::all_zero(std::int64_t r) const {
  const std::byte* values = record(r) + 8;
  const std::int64_t bytes = values_per_block() * value_bytes();
  for (std::int64_t b = 0; b < bytes; ++b)
    if (values[b] != std::byte{0}) return false;
  return true;
}

}  // namespace blockmm::tools
