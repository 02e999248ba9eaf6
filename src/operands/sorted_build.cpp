#include "operands/sorted_build.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "operands/block_masks.hpp"

namespace blockmm::operands {
namespace {

// Parts of the records run in parallel, each writing its blocks at its records' own positions;
// all-zero blocks, if any, are squeezed out afterwards.
// Parts from 64 Ki records or 1 MiB of them: large blocks (m = 23's 1 KiB records) are few but
// each costs as much as hundreds of small ones.
constexpr std::int64_t kParallelRecords = 1 << 16;
constexpr std::int64_t kParallelBytes = std::int64_t{1} << 20;
// A read from a source: a piece stays in the reading core's cache (L2) until it is copied.
constexpr std::int64_t kPieceBytes = std::int64_t{256} << 10;

std::int64_t part_begin(std::int64_t count, int part, int parts) { return count * part / parts; }

// Block-row and order key of a record (rows and columns non-negative where it matters: a record
// whose row is out of range fails the build anyway).
std::uint64_t record_key(const std::byte* rec) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(record_row(rec))) << 32 |
         static_cast<std::uint32_t>(record_col(rec));
}

// Where the copy writes: the matrix's arrays, sized for every record.
struct SortedTarget {
  std::int64_t* row_ptr;
  std::int32_t* col;
  std::uint16_t* values;
  std::uint64_t* masks;
  std::int32_t row_begin, row_end;
  OperandRole role;
  std::int32_t m;
};

// What one part of the records found, carried from one piece of it to the next: rows
// (row_before, last_row] took their row_ptr from it.
struct SortedPart {
  std::int64_t zeros = 0;  // all-zero blocks it dropped
  std::int32_t row_before = 0;
  std::int32_t last_row = 0;
  bool in_order = true;
  std::int64_t next_block = 0;  // where its next kept block goes
  std::uint64_t previous = 0;   // the key of the record before the next one
  bool first = true;            // no record before (the operand's first is next)
};

// A part that starts at record q0; `before` is record q0 - 1 (nullptr where q0 = 0).
SortedPart start_part(std::int64_t q0, const std::byte* before, std::int32_t row_begin) {
  SortedPart part;
  part.next_block = q0;
  part.row_before = row_begin - 1;
  if (before != nullptr) {
    part.first = false;
    part.previous = record_key(before);
    // (A row before the range fails the part before; this one must not write before row_ptr.)
    part.row_before = std::max(row_begin - 1, record_row(before));
  }
  part.last_row = part.row_before;
  return part;
}

// The mask and zero test of one block, m fixed at compile time (M > 0) so that the loops unroll
// into register work; returns false for an all-zero block.
template <int M>
bool small_block(const std::byte* values, OperandRole role, std::uint16_t* out, std::uint64_t* mask) {
  std::uint16_t v[M * M];
  std::memcpy(v, values, sizeof v);
  std::uint16_t any = 0;
  for (int e = 0; e < M * M; ++e) any |= v[e];
  if (any == 0) return false;
  std::memcpy(out, v, sizeof v);
  if (role == OperandRole::plain) return true;
  std::uint64_t bits = 0;
  if (role == OperandRole::left) {
    for (int c = 0; c < M; ++c) {
      std::uint16_t column = 0;
      for (int r = 0; r < M; ++r) column |= v[r * M + c];
      bits |= std::uint64_t{column != 0} << c;
    }
  } else {
    for (int r = 0; r < M; ++r) {
      std::uint16_t row = 0;
      for (int c = 0; c < M; ++c) row |= v[r * M + c];
      bits |= std::uint64_t{row != 0} << r;
    }
  }
  *mask = bits;
  return true;
}

// The next `count` records of a part (at `rec`, `stride` bytes apart) into their blocks,
// stopping at the first record out of order or out of [row_begin, row_end).
template <int M>
void copy_sorted_piece(const std::byte* rec, std::int64_t count, std::int64_t stride, const SortedTarget& to,
                       SortedPart& part) {
  const std::int32_t m = M > 0 ? M : to.m;
  const std::int64_t mm = std::int64_t{m} * m;
  const OperandRole role = to.role;
  const std::int32_t words = role == OperandRole::plain ? 0 : mask_words(m);
  // Locals, not the structs' fields: the stores below (int32 columns among them) could alias
  // those fields, which the compiler then reloaded for every record.
  std::int64_t* const row_ptr = to.row_ptr;
  std::int32_t* const col = to.col;
  std::uint16_t* const values = to.values;
  std::uint64_t* const masks = to.masks;
  const std::int32_t row_begin = to.row_begin, row_end = to.row_end;
  std::uint64_t previous = part.previous;
  bool first = part.first;
  std::int32_t row = part.last_row;
  std::int64_t b = part.next_block;
  std::int64_t zeros = part.zeros;
  bool in_order = true;
  for (std::int64_t q = 0; q < count; ++q, rec += stride) {
    const std::int32_t i = record_row(rec), j = record_col(rec);
    const std::uint64_t key = static_cast<std::uint64_t>(static_cast<std::uint32_t>(i)) << 32 | static_cast<std::uint32_t>(j);
    if (i < row_begin || i >= row_end || (!first && key <= previous)) {
      in_order = false;
      break;
    }
    first = false;
    previous = key;
    for (; row < i; ++row) row_ptr[row + 1 - row_begin] = b;
    std::uint16_t* out = values + b * mm;
    if constexpr (M > 0) {
      if (!small_block<M>(rec + 8, role, out, masks + b * words)) {
        ++zeros;
        continue;
      }
    } else {
      const auto* v = reinterpret_cast<const std::uint16_t*>(rec + 8);
      if (all_zero(v, mm)) {
        ++zeros;
        continue;
      }
      std::memcpy(out, v, static_cast<std::size_t>(mm) * 2);
      if (words > 0) {
        std::uint64_t* mask = masks + b * words;
        std::fill(mask, mask + words, 0);
        compute_mask(v, m, role, mask);
      }
    }
    col[b] = j;
    ++b;
  }
  part.previous = previous;
  part.first = first;
  part.last_row = row;
  part.next_block = b;
  part.zeros = zeros;
  part.in_order = in_order;
}

using SortedPieceCopy = void (*)(const std::byte*, std::int64_t, std::int64_t, const SortedTarget&, SortedPart&);

SortedPieceCopy sorted_piece_copy(std::int32_t m) {
  switch (m) {
    case 1: return copy_sorted_piece<1>;
    case 2: return copy_sorted_piece<2>;
    case 3: return copy_sorted_piece<3>;
    case 4: return copy_sorted_piece<4>;
    case 5: return copy_sorted_piece<5>;
    case 6: return copy_sorted_piece<6>;
    case 7: return copy_sorted_piece<7>;
    case 8: return copy_sorted_piece<8>;
    default: return copy_sorted_piece<0>;
  }
}

// Whether the keys of `count` records from `rec` increase strictly.
bool keys_increase(const std::byte* rec, std::int64_t count, std::int64_t stride) {
  for (std::int64_t q = 1; q < count; ++q)
    if (record_key(rec + q * stride) <= record_key(rec + (q - 1) * stride)) return false;
  return true;
}

// The records' first and last few keys in order: worth trying the one-pass build (a shuffled
// file fails here, before any memory is touched). Reads through `read(first, count, dest)`.
constexpr std::int64_t kProbe = 64;
template <typename Read>
bool looks_sorted(std::int64_t count, std::int64_t stride, Read&& read) {
  const std::int64_t head = count > 2 * kProbe ? kProbe : count;  // few records: all of them
  // Room for what is read, no more: the records' own number, not the probe's, where they are few
  // (a header's block size can make one record large; memory follows the records).
  std::vector<std::byte> probe(static_cast<std::size_t>((head == count ? count : kProbe + 1) * stride));
  read(0, head, probe.data());
  if (!keys_increase(probe.data(), head, stride)) return false;
  if (head == count) return true;
  read(count - kProbe - 1, kProbe + 1, probe.data());  // with the record before, as every key is compared
  return keys_increase(probe.data(), kProbe + 1, stride);
}

// The matrix's arrays sized for every record.
SortedTarget size_arrays(BlockMatrix& matrix, std::int64_t count, OperandRole role) {
  const std::int64_t mm = matrix.shape.block_values();
  const std::int32_t words = role == OperandRole::plain ? 0 : mask_words(matrix.shape.m);
  matrix.row_ptr.assign(static_cast<std::size_t>(matrix.rows_held()) + 1, 0);
  matrix.col.resize(static_cast<std::size_t>(count));
  matrix.values.resize(static_cast<std::size_t>(count * mm));
  matrix.masks.resize(static_cast<std::size_t>(count * words));
  return {matrix.row_ptr.data(), matrix.col.data(), matrix.values.data(), matrix.masks.data(),
          matrix.row_begin, matrix.row_end, role, matrix.shape.m};
}

// After the parts (`parts` of `count` records, part_begin's split): false if one was out of
// order; else the all-zero blocks squeezed out and the rows after the last record closed.
bool finish_sorted_build(const std::vector<SortedPart>& found, std::int64_t count, OperandRole role, BlockMatrix& matrix) {
  for (const SortedPart& part : found)
    if (!part.in_order) return false;
  const int parts = static_cast<int>(found.size());
  const std::int64_t mm = matrix.shape.block_values();
  const std::int32_t words = role == OperandRole::plain ? 0 : mask_words(matrix.shape.m);
  // Part t's blocks move down by the zeros of the parts before it (in order, so that no move
  // overwrites blocks not yet moved), and so do the row starts it set.
  std::int64_t shift = 0;
  for (int t = 0; t < parts; ++t) {
    const SortedPart& part = found[static_cast<std::size_t>(t)];
    const std::int64_t q0 = part_begin(count, t, parts);
    const std::int64_t kept = part_begin(count, t + 1, parts) - q0 - part.zeros;
    if (shift > 0) {
      std::memmove(matrix.col.data() + q0 - shift, matrix.col.data() + q0, static_cast<std::size_t>(kept) * 4);
      std::memmove(matrix.values.data() + (q0 - shift) * mm, matrix.values.data() + q0 * mm,
                   static_cast<std::size_t>(kept * mm) * 2);
      if (words > 0)  // (a plain operand has no masks: their array is empty, its data null)
        std::memmove(matrix.masks.data() + (q0 - shift) * words, matrix.masks.data() + q0 * words,
                     static_cast<std::size_t>(kept * words) * 8);
      for (std::int32_t r = part.row_before + 1; r <= part.last_row; ++r)
        matrix.row_ptr[static_cast<std::size_t>(r - matrix.row_begin)] -= shift;
    }
    shift += part.zeros;
  }
  const std::int64_t blocks = count - shift;
  const std::int32_t last_row = count > 0 ? found.back().last_row : matrix.row_begin - 1;
  for (std::int32_t r = last_row + 1; r <= matrix.row_end; ++r)
    matrix.row_ptr[static_cast<std::size_t>(r - matrix.row_begin)] = blocks;
  matrix.col.resize(static_cast<std::size_t>(blocks));
  matrix.values.resize(static_cast<std::size_t>(blocks * mm));
  matrix.masks.resize(static_cast<std::size_t>(blocks * words));
  return true;
}

int parts_for(std::int64_t count, std::int64_t stride) {
  return count >= kParallelRecords || count * stride >= kParallelBytes ? omp_get_max_threads() : 1;
}

}  // namespace

bool build_from_sorted_records(const InputRecords& records, OperandRole role, BlockMatrix& matrix) {
  const std::int64_t count = records.size();
  const std::int64_t stride = records.stride();
  const auto read = [&](std::int64_t first, std::int64_t n, std::byte* dest) {
    if (n > 0) std::memcpy(dest, records.record(first), static_cast<std::size_t>(n * stride));  // (no records: null)
  };
  if (!looks_sorted(count, stride, read)) return false;
  const SortedTarget to = size_arrays(matrix, count, role);
  const int parts = parts_for(count, stride);
  std::vector<SortedPart> found(static_cast<std::size_t>(parts));
  const SortedPieceCopy copy = sorted_piece_copy(records.shape.m);
#pragma omp parallel for schedule(static, 1) if (parts > 1)
  for (int t = 0; t < parts; ++t) {
    const std::int64_t q0 = part_begin(count, t, parts);
    SortedPart& part = found[static_cast<std::size_t>(t)];
    part = start_part(q0, q0 > 0 ? records.record(q0 - 1) : nullptr, matrix.row_begin);
    copy(records.bytes.data() + q0 * stride, part_begin(count, t + 1, parts) - q0, stride, to, part);
  }
  return finish_sorted_build(found, count, role, matrix);
}

bool build_from_sorted_source(const RecordSource& source, OperandRole role, BlockMatrix& matrix) {
  const std::int64_t count = source.size();
  const std::int64_t stride = source.stride();
  if (count == 0 || !source.concurrent()) return false;
  const auto read = [&](std::int64_t first, std::int64_t n, std::byte* dest) { source.read(first, n, dest); };
  try {
    if (!looks_sorted(count, stride, read)) return false;
  } catch (const InputError&) {
    return false;
  }
  const SortedTarget to = size_arrays(matrix, count, role);
  const int parts = parts_for(count, stride);
  const std::int64_t per_piece = std::max<std::int64_t>(1, kPieceBytes / stride);
  std::vector<SortedPart> found(static_cast<std::size_t>(parts));
  const SortedPieceCopy copy = sorted_piece_copy(source.shape().m);
  // Every part's piece, allocated here rather than by the threads (a thread's first allocation
  // makes glibc reserve 64 MiB of address space for its own arena).
  const std::int64_t piece_bytes = std::min(per_piece, std::max<std::int64_t>(1, (count + parts - 1) / parts)) * stride;
  LargeVector<std::byte> pieces(static_cast<std::size_t>(parts * piece_bytes));
  std::atomic<bool> refused{false};  // a part out of order, or a read refused: the general build's
  ParallelFailure failure;           // anything else (out of memory): rethrown
#pragma omp parallel for schedule(static, 1) if (parts > 1)
  for (int t = 0; t < parts; ++t) {
    failure.run([&] {
      SortedPart& part = found[static_cast<std::size_t>(t)];
      try {
        const std::int64_t q0 = part_begin(count, t, parts), q1 = part_begin(count, t + 1, parts);
        std::byte* const piece = pieces.data() + t * piece_bytes;
        const std::int64_t room = piece_bytes / stride;
        if (q0 > 0) source.read(q0 - 1, 1, piece);
        part = start_part(q0, q0 > 0 ? piece : nullptr, matrix.row_begin);
        for (std::int64_t q = q0; q < q1 && part.in_order && !refused.load(std::memory_order_relaxed); q += room) {
          const std::int64_t n = std::min(room, q1 - q);
          source.read(q, n, piece);
          copy(piece, n, stride, to, part);
        }
      } catch (const InputError&) {
        part.in_order = false;
      }
      if (!part.in_order) refused.store(true, std::memory_order_relaxed);
    });
  }
  failure.rethrow_if_failed();
  if (refused.load() || !finish_sorted_build(found, count, role, matrix)) {
    matrix.row_ptr = {};
    matrix.col = {};
    matrix.values = {};
    matrix.masks = {};
    return false;
  }
  return true;
}

}  // namespace blockmm::operands
