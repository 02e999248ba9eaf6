// blockmm-convert's conversion: COL380 binary <-> HDF5 BSR (docs/formats.md), lossless, for inputs (uint16)
// and products (uint32). The input's kind comes from its signature, the output's from --to or
// OUT's extension. BSR stores blocks sorted by (i, j): a sorted binary file (every blockmm
// product is one) streams through in pieces; an unsorted one is loaded and sorted in memory,
// and a repeated block is an error. HDF5 -> binary writes the blocks in BSR order, so
// bin -> h5 -> bin of a sorted file gives back the same bytes.
#include "tools/convert.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/atomic_output.hpp"
#include "io/binary_format.hpp"
#include "io/file_access.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"

namespace blockmm::tools {
namespace {

using io::BsrHeader;
using io::ValueWidth;

constexpr std::int64_t kPieceBytes = std::int64_t{32} << 20;  // records moved at a time

// A matrix to convert: header and its blocks in (i, j) order, read piece by piece. Nothing here
// is sized by n: a 12-byte file may claim n = 2^31 - 1 (an HDF5 output's /indptr is written from
// the blocks' rows as they pass, in bounded pieces).
struct Source {
  BsrHeader header;
  std::function<std::vector<std::byte>(std::int64_t first, std::int64_t count)> read;
};

const char* width_name(ValueWidth width) { return width == ValueWidth::u16 ? "uint16" : "uint32"; }

Source hdf5_source(const std::string& path, const std::string& values) {
  auto reader = std::make_shared<io::BsrReader>(path, io::BsrValues::input_or_product);
  Source source;
  source.header = reader->header();
  if ((values == "u16" && source.header.width != ValueWidth::u16) ||
      (values == "u32" && source.header.width != ValueWidth::u32))
    throw InputError(path + ": /data holds " + width_name(source.header.width) + " values, not the " + values +
                     " that --values asks for");
  source.read = [reader](std::int64_t first, std::int64_t count) { return reader->read_records(first, count); };
  return source;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::uint64_t key_of(const std::byte* record) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(record_row(record))) << 32) |
         static_cast<std::uint32_t>(record_col(record));
}

[[noreturn]] void duplicate(const io::BinaryFileInfo& file, const std::byte* record, std::int64_t a, std::int64_t b) {
  throw InputError(file.path + ": duplicate block (" + std::to_string(record_row(record)) + ", " +
                   std::to_string(record_col(record)) + ") at records " + std::to_string(a) + " and " +
                   std::to_string(b) + " (byte offsets " + std::to_string(file.record_offset(a)) + " and " +
                   std::to_string(file.record_offset(b)) + ")");
}

Source binary_source(const std::string& path, const std::string& values) {
  // Width: from the file's size (both fit only when k = 0, which reads as an input unless --values u32).
  const ValueWidth u16 = ValueWidth::u16, u32 = ValueWidth::u32;
  const io::BinaryFileInfo info =
      io::inspect_binary_explained(path, values == "u16" ? &u16 : values == "u32" ? &u32 : nullptr);
  const std::int64_t k = info.header.k;
  const std::int64_t stride = info.record_bytes();
  auto fd = std::make_shared<Fd>();
  fd->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd->fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));

  // Pass 1, streamed: indices in range, and whether the file is already sorted.
  Source source;
  source.header = {info.header.n, info.header.m, k, info.width};
  bool sorted = true;
  std::uint64_t previous = 0;
  const std::int64_t per_piece = std::max<std::int64_t>(1, kPieceBytes / stride);
  std::vector<std::byte> piece;
  for (std::int64_t first = 0; first < k; first += per_piece) {
    const std::int64_t count = std::min(per_piece, k - first);
    piece.resize(static_cast<std::size_t>(count * stride));
    io::read_fully(fd->fd, info.record_offset(first), piece.data(), count * stride, path);
    io::validate_record_indices(info, piece.data(), first, count);
    for (std::int64_t r = 0; r < count; ++r) {
      const std::byte* record = piece.data() + r * stride;
      const std::uint64_t key = key_of(record);
      if (first + r > 0 && sorted) {
        if (key == previous) duplicate(info, record, first + r - 1, first + r);
        if (key < previous) sorted = false;
      }
      previous = key;
    }
  }

  if (sorted) {
    source.read = [fd, info, stride](std::int64_t first, std::int64_t count) {
      std::vector<std::byte> records(static_cast<std::size_t>(count * stride));
      io::read_fully(fd->fd, info.record_offset(first), records.data(), count * stride, info.path);
      return records;
    };
    return source;
  }

  // Unsorted: load it, order the records by (i, j) and reject repeats.
  auto all = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(k * stride));
  io::read_fully(fd->fd, info.record_offset(0), all->data(), k * stride, path);
  io::validate_record_indices(info, all->data(), 0, k);  // the file may have changed since pass 1
  std::vector<std::pair<std::uint64_t, std::int64_t>> order(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < k; ++r) order[r] = {key_of(all->data() + r * stride), r};
  std::sort(order.begin(), order.end());
  for (std::int64_t r = 1; r < k; ++r)
    if (order[r].first == order[r - 1].first)
      duplicate(info, all->data() + order[r].second * stride, order[r - 1].second, order[r].second);
  auto permutation = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < k; ++r) (*permutation)[r] = order[r].second;
  source.read = [all, permutation, stride](std::int64_t first, std::int64_t count) {
    std::vector<std::byte> records(static_cast<std::size_t>(count * stride));
    for (std::int64_t r = 0; r < count; ++r)
      std::memcpy(records.data() + r * stride, all->data() + (*permutation)[first + r] * stride,
                  static_cast<std::size_t>(stride));
    return records;
  };
  return source;
}

// Calls `take(first, count, records)` for every block, in pieces of bounded size.
void for_each_piece(const Source& source, const std::function<void(std::int64_t, std::int64_t, const std::byte*)>& take) {
  const std::int64_t per_piece = std::max<std::int64_t>(1, kPieceBytes / source.header.record_bytes());
  for (std::int64_t first = 0; first < source.header.nnzb; first += per_piece) {
    const std::int64_t count = std::min(per_piece, source.header.nnzb - first);
    const std::vector<std::byte> records = source.read(first, count);
    take(first, count, records.data());
  }
}

void write_binary(const Source& source, const std::string& target) {
  const BsrHeader& h = source.header;
  if (h.nnzb > std::numeric_limits<std::int32_t>::max())
    throw OutputError(target + ": " + std::to_string(h.nnzb) +
                      " blocks are more than the binary format's int32 k can hold");
  const comm::Communicator single{comm::CommunicatorOptions{}};
  io::AtomicOutput output(target, single);
  auto file = output.open_writer();
  const std::int32_t header[3] = {h.n, h.m, static_cast<std::int32_t>(h.nnzb)};
  file->write_at(0, header, sizeof header);
  for_each_piece(source, [&](std::int64_t first, std::int64_t count, const std::byte* records) {
    file->write_at(kHeaderBytes + first * h.record_bytes(), records, count * h.record_bytes());
  });
  file->sync_and_close();
  output.commit();
}

// /indptr's p + 1 entries from the rows that hold blocks (row, blocks up to and including it),
// written in pieces of bounded size: entry r counts the blocks of rows below r.
void write_indptr(io::BsrContentWriter& content, std::int32_t p,
                  const std::vector<std::pair<std::int32_t, std::int64_t>>& row_ends) {
  constexpr std::int64_t kEntries = std::int64_t{1} << 20;
  std::vector<std::int64_t> piece;
  std::size_t next = 0;  // the first listed row at or above the entry being filled
  std::int64_t before = 0;
  for (std::int64_t first = 0; first <= p; first += kEntries) {
    const std::int64_t count = std::min(kEntries, std::int64_t{p} + 1 - first);
    piece.resize(static_cast<std::size_t>(count));
    for (std::int64_t r = first; r < first + count; ++r) {
      while (next < row_ends.size() && row_ends[next].first < r) before = row_ends[next++].second;
      piece[static_cast<std::size_t>(r - first)] = before;
    }
    content.write_indptr(first, piece.data(), count);
  }
}

void write_hdf5(const Source& source, const std::string& target) {
  const comm::Communicator single{comm::CommunicatorOptions{}};
  io::AtomicOutput output(target, single);
  const io::BsrLayout layout = io::create_bsr_file(output.path_for_library(), target, source.header);
  auto file = output.open_writer();
  io::BsrContentWriter content(*file, source.header, layout);
  std::vector<std::pair<std::int32_t, std::int64_t>> row_ends;  // one a row that holds blocks
  const std::int64_t stride = source.header.record_bytes();
  for_each_piece(source, [&](std::int64_t first, std::int64_t count, const std::byte* records) {
    content.write_records(first, count, records);
    for (std::int64_t r = 0; r < count; ++r) {
      const std::int32_t i = record_row(records + r * stride);
      if (row_ends.empty() || row_ends.back().first != i) row_ends.emplace_back(i, 0);
      row_ends.back().second = first + r + 1;
    }
  });
  write_indptr(content, source.header.block_rows(), row_ends);
  file->sync_and_close();
  output.commit();
}

}  // namespace

void convert_matrix(const std::string& in_path, const std::string& out_path, io::OutputFormat format,
                    const std::string& values) {
  const Source source = io::has_hdf5_signature(in_path) ? hdf5_source(in_path, values) : binary_source(in_path, values);
  if (format == io::OutputFormat::hdf5)
    write_hdf5(source, out_path);
  else
    write_binary(source, out_path);
}

}  // namespace blockmm::tools
