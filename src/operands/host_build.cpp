#include "operands/host_build.hpp"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "operands/block_masks.hpp"
#include "operands/sorted_build.hpp"

namespace blockmm::operands {
namespace {

// Splits [0, count) into `parts` near-equal static ranges (deterministic placement).
std::int64_t part_begin(std::int64_t count, int part, int parts) { return count * part / parts; }

constexpr std::int64_t kParallelItems = 1 << 16;

// Turns per-part histograms hist[part * bins + bin] into each part's first slot for every bin
// (bins in order, parts in order within a bin) and returns each bin's start (bins + 1 entries).
// Parallel over bins: with a million block-rows the serial strided walk dominated the build.
std::vector<std::int64_t> part_offsets(std::vector<std::int64_t>& hist, std::int64_t bins, int parts) {
  std::vector<std::int64_t> start(static_cast<std::size_t>(bins) + 1, 0);
#pragma omp parallel for schedule(static) if (bins * parts >= kParallelItems)
  for (std::int64_t j = 0; j < bins; ++j) {
    std::int64_t total = 0;
    for (int t = 0; t < parts; ++t) total += hist[static_cast<std::size_t>(t) * bins + j];
    start[j + 1] = total;
  }
  for (std::int64_t j = 0; j < bins; ++j) start[j + 1] += start[j];
#pragma omp parallel for schedule(static) if (bins * parts >= kParallelItems)
  for (std::int64_t j = 0; j < bins; ++j) {
    std::int64_t running = start[j];
    for (int t = 0; t < parts; ++t) {
      const std::int64_t c = hist[static_cast<std::size_t>(t) * bins + j];
      hist[static_cast<std::size_t>(t) * bins + j] = running;
      running += c;
    }
  }
  return start;
}

// Histogram slices per thread: bounded so that huge p with many threads cannot explode memory,
// and one slice for small inputs, where waking threads costs more than the work.
int histogram_parts(std::int64_t bins, std::int64_t items) {
  const std::int64_t budget = std::int64_t{1} << 27;  // counters in all slices together
  const int threads = items < kParallelItems ? 1 : omp_get_max_threads();
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, budget / std::max<std::int64_t>(1, bins))));
}

// CSC of a CSR matrix: per-part column counts over row ranges, so the fill is parallel and each
// column's rows still come out ascending (parts own ascending row ranges).
void build_csc(BlockMatrix& matrix) {
  const std::int32_t p = matrix.shape.block_rows();
  const std::int32_t rows = matrix.rows_held();
  const int parts = histogram_parts(p, matrix.blocks());
  std::vector<std::int64_t> offset(static_cast<std::size_t>(parts) * p, 0);
#pragma omp parallel for schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    std::int64_t* count = offset.data() + static_cast<std::size_t>(t) * p;
    const std::int64_t b0 = matrix.row_ptr[part_begin(rows, t, parts)];
    const std::int64_t b1 = matrix.row_ptr[part_begin(rows, t + 1, parts)];
    for (std::int64_t b = b0; b < b1; ++b) ++count[matrix.col[b]];
  }
  matrix.col_ptr = part_offsets(offset, p, parts);
  matrix.csc_row.resize(matrix.col.size());
  matrix.csc_block.resize(matrix.col.size());
#pragma omp parallel for schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    std::int64_t* next = offset.data() + static_cast<std::size_t>(t) * p;
    for (std::int32_t r = static_cast<std::int32_t>(part_begin(rows, t, parts));
         r < static_cast<std::int32_t>(part_begin(rows, t + 1, parts)); ++r) {
      for (std::int64_t b = matrix.row_ptr[r]; b < matrix.row_ptr[r + 1]; ++b) {
        const std::int64_t slot = next[matrix.col[b]]++;
        matrix.csc_row[slot] = matrix.row_begin + r;
        matrix.csc_block[slot] = static_cast<std::int32_t>(b);
      }
    }
  }
}

// Sort key of a record within its row: column, then a flag for all-zero blocks, then the
// record's index (k < 2^31, so bit 31 is free for the flag).
constexpr std::uint64_t kZeroFlag = std::uint64_t{1} << 31;
std::int32_t key_col(std::uint64_t key) { return static_cast<std::int32_t>(key >> 32); }
std::int64_t key_record(std::uint64_t key) { return static_cast<std::int64_t>(key & (kZeroFlag - 1)); }
bool key_zero(std::uint64_t key) { return (key & kZeroFlag) != 0; }

}  // namespace

// Several times faster than std::sort on rows of thousands of keys (an LSD radix sort on the
// column: a few passes over the row, no comparisons).
void sort_row_by_column(std::uint64_t* keys, std::int64_t n, int column_bits, std::uint64_t* scratch) {
  if (n < 48) {
    std::sort(keys, keys + n);
    return;
  }
  std::uint64_t* from = keys;
  std::uint64_t* to = scratch;
  for (int shift = 32; shift < 32 + column_bits; shift += 8) {
    std::int64_t start[257] = {};
    for (std::int64_t e = 0; e < n; ++e) ++start[((from[e] >> shift) & 255) + 1];
    if (std::find(start + 1, start + 257, n) != start + 257) continue;  // one digit for all
    for (int d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (std::int64_t e = 0; e < n; ++e) to[start[(from[e] >> shift) & 255]++] = from[e];
    std::swap(from, to);
  }
  if (from != keys) std::memcpy(keys, from, static_cast<std::size_t>(n) * sizeof *keys);
}

namespace {

// build_block_matrix's steps 1 and 2: compact sort keys (column, zero flag, record), bucketed
// by row, and where each row's start.
std::vector<std::int64_t> keys_by_row(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                                      LargeVector<std::uint64_t>& keys) {
  const std::int64_t mm = records.shape.block_values();
  const std::int32_t rows = row_end - row_begin;
  const std::int64_t count = records.size();
  // 1. Row histogram per part over static record ranges (records are read in order, once).
  const int parts = histogram_parts(rows, count);
  std::vector<std::int64_t> offset(static_cast<std::size_t>(parts) * rows, 0);
  std::int64_t misplaced = -1;
#pragma omp parallel for schedule(static, 1) reduction(max : misplaced)
  for (int t = 0; t < parts; ++t) {
    std::int64_t* hist = offset.data() + static_cast<std::size_t>(t) * rows;
    for (std::int64_t q = part_begin(count, t, parts); q < part_begin(count, t + 1, parts); ++q) {
      const std::int32_t i = record_row(records.record(q));
      if (i < row_begin || i >= row_end) {
        misplaced = std::max(misplaced, q);
        continue;
      }
      ++hist[i - row_begin];
    }
  }
  if (misplaced >= 0)
    throw Error(ExitCode::other, "internal error: block-row " + std::to_string(record_row(records.record(misplaced))) +
                                     " sent to the wrong rank");
  const std::vector<std::int64_t> start = part_offsets(offset, rows, parts);

  // 2. Scatter compact sort keys into row buckets; the zero test reads each record in order.
  keys.resize(static_cast<std::size_t>(count));
#pragma omp parallel for schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    std::int64_t* next = offset.data() + static_cast<std::size_t>(t) * rows;
    for (std::int64_t q = part_begin(count, t, parts); q < part_begin(count, t + 1, parts); ++q) {
      const std::byte* rec = records.record(q);
      const std::uint64_t key = (static_cast<std::uint64_t>(record_col(rec)) << 32) |
                                (all_zero(records.values(q), mm) ? kZeroFlag : 0) | static_cast<std::uint64_t>(q);
      keys[next[record_row(rec) - row_begin]++] = key;
    }
  }
  // (keys are written in parallel above; LargeVector leaves them uninitialised until then)
  return start;
}

}  // namespace

BlockMatrix build_block_matrix(const InputRecords& records, std::int32_t row_begin, std::int32_t row_end,
                               OperandRole role, const DuplicateMessage& duplicate_message, bool with_csc) {
  const std::int32_t m = records.shape.m;
  const std::int64_t mm = records.shape.block_values();
  const std::int32_t rows = row_end - row_begin;
  const std::int64_t count = records.size();
  if (count > std::int64_t{INT32_MAX})
    throw Error(ExitCode::resource, "more than 2^31 - 1 blocks on one rank; use more ranks");
  BlockMatrix matrix;
  matrix.shape = records.shape;
  matrix.row_begin = row_begin;
  matrix.row_end = row_end;
  if (build_from_sorted_records(records, role, matrix)) {
    if (role == OperandRole::right && with_csc) build_csc(matrix);
    return matrix;
  }

  // 1, 2. Each row's sort keys, in row buckets.
  LargeVector<std::uint64_t> keys;
  const std::vector<std::int64_t> start = keys_by_row(records, row_begin, row_end, keys);

  // 3. Sort each row's keys (contiguous, cache-resident), find duplicates, count kept blocks.
  matrix.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  std::int64_t duplicate_at = -1;
  int column_bits = 0;
  while (column_bits < 31 && (std::int64_t{1} << column_bits) < records.shape.block_rows()) ++column_bits;
  ParallelFailure failure;  // a thread's scratch may not fit: rethrown after the region
#pragma omp parallel reduction(max : duplicate_at) if (count >= kParallelItems)
  {
    std::vector<std::uint64_t> scratch;  // per thread, grown to the longest row it sorts
#pragma omp for schedule(dynamic, 64)
    for (std::int32_t r = 0; r < rows; ++r) {
      if (failure.failed()) continue;
      std::uint64_t* row_keys = keys.data() + start[r];
      const std::int64_t row_size = start[r + 1] - start[r];
      // Files written in row-major order (blockmm's own outputs) arrive sorted: no sort then.
      if (!std::is_sorted(row_keys, row_keys + row_size)) {
        if (scratch.size() < static_cast<std::size_t>(row_size)) {
          try {
            scratch.resize(static_cast<std::size_t>(row_size));
          } catch (...) {
            failure.capture();
            continue;
          }
        }
        sort_row_by_column(row_keys, row_size, column_bits, scratch.data());
      }
      std::int64_t kept = 0;
      for (std::int64_t s = start[r]; s < start[r + 1]; ++s) {
        kept += !key_zero(keys[s]);
        if (s > start[r] && key_col(keys[s]) == key_col(keys[s - 1])) duplicate_at = std::max(duplicate_at, s);
      }
      matrix.row_ptr[r + 1] = kept;
    }
  }
  failure.rethrow_if_failed();
  if (duplicate_at >= 0)
    throw InputError(duplicate_message(record_row(records.record(key_record(keys[duplicate_at]))),
                                       key_col(keys[duplicate_at])));
  for (std::int32_t r = 0; r < rows; ++r) matrix.row_ptr[r + 1] += matrix.row_ptr[r];

  // 4. Gather the kept blocks' values in CSR order and compute their masks.
  const std::int64_t blocks = matrix.row_ptr[rows];
  const std::int32_t words = role == OperandRole::plain ? 0 : mask_words(m);
  matrix.col.resize(static_cast<std::size_t>(blocks));
  matrix.values.resize(static_cast<std::size_t>(blocks * mm));
  matrix.masks.resize(static_cast<std::size_t>(blocks * words));
  // The records are read in key order, i.e. at random: each read misses the caches, and the
  // copy and mask work between them keeps the core from overlapping the misses by itself, so
  // records a few keys ahead are prefetched (without it, this gather is most of a dense operand's
  // build).
  constexpr std::int64_t kPrefetchAhead = 12;
  const std::int64_t record_last_byte = records.stride() - 1;
#pragma omp parallel for schedule(dynamic, 64) if (count >= kParallelItems)
  for (std::int32_t r = 0; r < rows; ++r) {
    std::int64_t b = matrix.row_ptr[r];
    for (std::int64_t s = start[r]; s < start[r + 1]; ++s) {
      if (s + kPrefetchAhead < start[r + 1]) {
        const std::byte* ahead = records.record(key_record(keys[s + kPrefetchAhead]));
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + std::min<std::int64_t>(record_last_byte, 127));
      }
      if (key_zero(keys[s])) continue;
      const std::uint16_t* v = records.values(key_record(keys[s]));
      matrix.col[b] = key_col(keys[s]);
      std::memcpy(matrix.values.data() + b * mm, v, static_cast<std::size_t>(mm) * 2);
      if (words > 0) {
        std::uint64_t* mask = matrix.masks.data() + b * words;
        std::fill(mask, mask + words, 0);
        compute_mask(v, m, role, mask);
      }
      ++b;
    }
  }
  if (role == OperandRole::right && with_csc) build_csc(matrix);
  return matrix;
}

BlockMatrix build_block_matrix(RecordSource& source, std::int32_t row_begin, std::int32_t row_end, OperandRole role,
                               const DuplicateMessage& duplicate_message, bool with_csc) {
  if (!source.in_memory() && source.size() <= std::int64_t{INT32_MAX}) {
    BlockMatrix matrix;
    matrix.shape = source.shape();
    matrix.row_begin = row_begin;
    matrix.row_end = row_end;
    if (build_from_sorted_source(source, role, matrix)) {
      if (role == OperandRole::right && with_csc) build_csc(matrix);
      return matrix;
    }
  }
  const InputRecords records = source.take();
  return build_block_matrix(records, row_begin, row_end, role, duplicate_message, with_csc);
}

std::vector<std::int64_t> count_row_products(const BlockMatrix& a, const BlockRowsView& b) {
  std::vector<std::int64_t> products(static_cast<std::size_t>(a.rows_held()), 0);
#pragma omp parallel for schedule(dynamic, 64) if (a.blocks() >= (1 << 14))
  for (std::int32_t r = 0; r < a.rows_held(); ++r) {
    std::int64_t row = 0;
    for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
      const std::int32_t kr = a.col[e] - b.row_begin;
      if (kr >= 0 && kr < b.rows_held()) row += b.row_ptr[kr + 1] - b.row_ptr[kr];
    }
    products[static_cast<std::size_t>(r)] = row;
  }
  return products;
}

std::int64_t count_block_products(const BlockMatrix& a, const BlockRowsView& b) {
  const std::vector<std::int64_t> rows = count_row_products(a, b);
  return std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
}

BlockMatrix slice_rows(const BlockMatrix& a, std::int32_t row_begin, std::int32_t row_end) {
  if (row_begin < a.row_begin || row_end > a.row_end || row_begin > row_end)
    throw Error(ExitCode::other, "internal error: rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                     ") asked of a matrix holding [" + std::to_string(a.row_begin) + ", " +
                                     std::to_string(a.row_end) + ")");
  BlockMatrix slice;
  slice.shape = a.shape;
  slice.row_begin = row_begin;
  slice.row_end = row_end;
  const auto r0 = static_cast<std::size_t>(row_begin - a.row_begin), r1 = static_cast<std::size_t>(row_end - a.row_begin);
  const std::int64_t first = a.row_ptr[r0], last = a.row_ptr[r1];
  slice.row_ptr.reserve(r1 - r0 + 1);
  for (std::size_t r = r0; r <= r1; ++r) slice.row_ptr.push_back(a.row_ptr[r] - first);
  const std::int64_t values = a.shape.block_values(), words = mask_words(a.shape.m);
  slice.col.assign(a.col.begin() + first, a.col.begin() + last);
  slice.values.assign(a.values.begin() + first * values, a.values.begin() + last * values);
  slice.masks.assign(a.masks.begin() + first * words, a.masks.begin() + last * words);
  return slice;
}

BlockMatrix copy_rows(const BlockRowsView& rows) {
  BlockMatrix copy;
  copy.shape = rows.shape;
  copy.row_begin = rows.row_begin;
  copy.row_end = rows.row_end;
  const std::int64_t blocks = rows.blocks();
  copy.row_ptr.assign(rows.row_ptr, rows.row_ptr + rows.rows_held() + 1);
  copy.col.assign(rows.col, rows.col + blocks);
  copy.values.assign(rows.values, rows.values + blocks * rows.shape.block_values());
  copy.masks.assign(rows.masks, rows.masks + blocks * mask_words(rows.shape.m));
  return copy;
}

std::int64_t matrix_bytes(const BlockMatrix& matrix) {
  return static_cast<std::int64_t>(matrix.row_ptr.size() * 8 + matrix.col.size() * 4 + matrix.values.size() * 2 +
                                   matrix.masks.size() * 8 + matrix.col_ptr.size() * 8 + matrix.csc_row.size() * 4 +
                                   matrix.csc_block.size() * 4);
}

std::int64_t build_bytes(MatrixShape shape, std::int64_t records, std::int64_t rows) {
  const std::int64_t per_block = 2 * shape.block_values() + 8 + 4 + 4 + 4 + 8 * mask_words(shape.m);
  return records * (record_bytes<std::uint16_t>(shape.m) + per_block) + (rows + shape.block_rows() + 2) * 8;
}

}  // namespace blockmm::operands
