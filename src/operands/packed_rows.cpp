#include "operands/packed_rows.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace blockmm::operands {
namespace {

struct Header {
  std::int32_t n;
  std::int32_t m;
  std::int32_t row_begin;
  std::int32_t row_end;
  std::int64_t blocks;
};

struct Layout {
  std::int64_t row_ptr, col, values, masks, bytes;  // offsets, and the whole
};

std::int64_t aligned(std::int64_t offset) { return (offset + 63) / 64 * 64; }

Layout layout_of(const Header& h) {
  const std::int64_t rows = std::int64_t{h.row_end} - h.row_begin;
  const std::int64_t mm = std::int64_t{h.m} * h.m;
  Layout l{};
  l.row_ptr = aligned(sizeof(Header));
  l.col = aligned(l.row_ptr + (rows + 1) * 8);
  l.values = aligned(l.col + h.blocks * 4);
  l.masks = aligned(l.values + h.blocks * mm * 2);
  l.bytes = l.masks + h.blocks * mask_words(h.m) * 8;
  return l;
}

Header header_of(const BlockRowsView& rows) {
  return {rows.shape.n, rows.shape.m, rows.row_begin, rows.row_end, rows.blocks()};
}

// Copies `bytes` from `from` with the calling thread's team (B is tens of MB: a few ms on one).
void copy_in_parallel(std::byte* to, const void* from, std::int64_t bytes) {
  const auto* source = static_cast<const std::byte*>(from);
  const std::int64_t piece = std::int64_t{4} << 20;
#pragma omp parallel for schedule(static)
  for (std::int64_t at = 0; at < bytes; at += piece)
    std::memcpy(to + at, source + at, static_cast<std::size_t>(std::min(piece, bytes - at)));
}

}  // namespace

std::int64_t packed_bytes(const BlockRowsView& rows) { return layout_of(header_of(rows)).bytes; }

std::int64_t packed_bytes_bound(MatrixShape shape, std::int64_t blocks) {
  return layout_of({shape.n, shape.m, 0, shape.block_rows(), blocks}).bytes;
}

void pack_rows(const BlockRowsView& rows, std::byte* to) {
  const Header header = header_of(rows);
  const Layout l = layout_of(header);
  std::memcpy(to, &header, sizeof header);
  copy_in_parallel(to + l.row_ptr, rows.row_ptr, (std::int64_t{rows.rows_held()} + 1) * 8);
  copy_in_parallel(to + l.col, rows.col, header.blocks * 4);
  copy_in_parallel(to + l.values, rows.values, header.blocks * rows.shape.block_values() * 2);
  copy_in_parallel(to + l.masks, rows.masks, header.blocks * mask_words(header.m) * 8);
}

BlockRowsView packed_rows_view(const std::byte* packed, std::int64_t bytes) {
  Header header{};
  if (bytes < static_cast<std::int64_t>(sizeof header))
    throw Error(ExitCode::other, "internal error: packed block-rows smaller than their header");
  std::memcpy(&header, packed, sizeof header);
  const Layout l = layout_of(header);
  if (l.bytes > bytes) throw Error(ExitCode::other, "internal error: packed block-rows smaller than their header says");
  BlockRowsView rows;
  rows.shape = {header.n, header.m};
  rows.row_begin = header.row_begin;
  rows.row_end = header.row_end;
  rows.block_count = header.blocks;
  rows.row_ptr = reinterpret_cast<const std::int64_t*>(packed + l.row_ptr);
  rows.col = reinterpret_cast<const std::int32_t*>(packed + l.col);
  rows.values = reinterpret_cast<const std::uint16_t*>(packed + l.values);
  rows.masks = reinterpret_cast<const std::uint64_t*>(packed + l.masks);
  return rows;
}

}  // namespace blockmm::operands
