#include "tools/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace blockmm::tools {

MappedFile::MappedFile(const io::BinaryFileInfo& info) : info_(info), stride_(info.record_bytes()) {
  const int fd = ::open(info.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(info.path + ": cannot open: " + std::strerror(errno));
  mapped_bytes_ = static_cast<std::size_t>(info.file_bytes);
  void* base = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int saved = errno;
  ::close(fd);
  if (base == MAP_FAILED) throw InputError(info.path + ": cannot map the file: " + std::strerror(saved));
  base_ = static_cast<const std::byte*>(base);
  try {
    io::validate_record_indices(info_, base_ + kHeaderBytes, 0, info_.header.k);
  } catch (...) {
    ::munmap(const_cast<std::byte*>(base_), mapped_bytes_);
    throw;
  }
}

MappedFile::~MappedFile() { ::munmap(const_cast<std::byte*>(base_), mapped_bytes_); }

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
