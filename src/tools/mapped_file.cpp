#include "tools/mapped_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "core/error.hpp"
#include "io/file_access.hpp"

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
