#include "driver/shared_right_operand.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/host_operands.hpp"

namespace blockmm::driver {
namespace {

// The shared copy: this header, then row pointers, columns, values and masks, each from a
// 64-byte boundary.
struct SharedHeader {
  std::int32_t n;
  std::int32_t m;
  std::int32_t row_begin;
  std::int32_t row_end;
  std::int64_t blocks;
};

struct SharedLayout {
  std::int64_t row_ptr, col, values, masks, bytes;  // offsets, and the whole
};

std::int64_t aligned(std::int64_t offset) { return (offset + 63) / 64 * 64; }

SharedLayout layout_of(const SharedHeader& h) {
  const std::int64_t rows = std::int64_t{h.row_end} - h.row_begin;
  const std::int64_t mm = std::int64_t{h.m} * h.m;
  SharedLayout l{};
  l.row_ptr = aligned(sizeof(SharedHeader));
  l.col = aligned(l.row_ptr + (rows + 1) * 8);
  l.values = aligned(l.col + h.blocks * 4);
  l.masks = aligned(l.values + h.blocks * mm * 2);
  l.bytes = l.masks + h.blocks * mask_words(h.m) * 8;
  return l;
}

// Copies `bytes` from `from` with the rank's threads (B is tens of MB: a few ms on one).
void copy_in_parallel(std::byte* to, const void* from, std::int64_t bytes) {
  const auto* source = static_cast<const std::byte*>(from);
  const std::int64_t piece = std::int64_t{4} << 20;
#pragma omp parallel for schedule(static)
  for (std::int64_t at = 0; at < bytes; at += piece)
    std::memcpy(to + at, source + at, static_cast<std::size_t>(std::min(piece, bytes - at)));
}

}  // namespace

bool right_operand_may_be_shared(const kernels::Backend& backend) {
  const char* setting = std::getenv("BLOCKMM_SHARE_B");
  if (setting != nullptr && std::string(setting) == "0") return false;
  // The memory is anonymous (no /dev/shm file, whose size containers often cap at 64 MB): it is
  // the node's memory, of which one copy takes less than a copy a rank.
  return backend.right_operand_shareable();
}

std::unique_ptr<kernels::Operand> right_operand_shared_on_node(std::unique_ptr<kernels::Operand> b,
                                                               comm::NodeSharedMemory& memory,
                                                               const comm::Communicator& comm) {
  const bool first = comm.rank() == comm.node_leader();
  if (first != (b != nullptr))
    throw Error(ExitCode::other, "internal error: the node's first rank, and only it, builds the shared B");
  SharedHeader header{};
  const BlockRowsView* own = nullptr;
  if (first) {
    own = &kernels::host_rows(*b);
    header = {own->shape.n, own->shape.m, own->row_begin, own->row_end, own->blocks()};
  }
  const std::int64_t bytes = first ? layout_of(header).bytes : 0;
  std::shared_ptr<comm::NodeSharedBytes> shared = memory.map(bytes);
  if (first) {
    const SharedLayout l = layout_of(header);
    std::memcpy(shared->data(), &header, sizeof header);
    const std::int64_t rows = own->rows_held();
    copy_in_parallel(shared->data() + l.row_ptr, own->row_ptr, (rows + 1) * 8);
    copy_in_parallel(shared->data() + l.col, own->col, header.blocks * 4);
    copy_in_parallel(shared->data() + l.values, own->values, header.blocks * own->shape.block_values() * 2);
    copy_in_parallel(shared->data() + l.masks, own->masks, header.blocks * mask_words(header.m) * 8);
    b.reset();  // the rank's own copy: the node reads the shared one
  }
  shared->publish();
  std::memcpy(&header, shared->data(), sizeof header);
  const SharedLayout l = layout_of(header);
  if (l.bytes > shared->size())
    throw Error(ExitCode::other, "internal error: the node's shared B is smaller than its header says");
  BlockRowsView rows;
  rows.shape = {header.n, header.m};
  rows.row_begin = header.row_begin;
  rows.row_end = header.row_end;
  rows.block_count = header.blocks;
  rows.row_ptr = reinterpret_cast<const std::int64_t*>(shared->data() + l.row_ptr);
  rows.col = reinterpret_cast<const std::int32_t*>(shared->data() + l.col);
  rows.values = reinterpret_cast<const std::uint16_t*>(shared->data() + l.values);
  rows.masks = reinterpret_cast<const std::uint64_t*>(shared->data() + l.masks);
  return std::make_unique<kernels::HostOperand>(rows, std::shared_ptr<const void>(shared, shared->data()));
}

}  // namespace blockmm::driver
