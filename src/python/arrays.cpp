#include "python/arrays.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "core/madvise_advice.hpp"
#include "core/parallel_failure.hpp"
#include "core/record_layout.hpp"

namespace blockmm::python {
namespace {

std::string text(std::int64_t value) { return std::to_string(value); }

// Pages are prepared this much at a time: the threads' front moves in steps the writes follow.
constexpr std::int64_t kAheadPieceBytes = std::int64_t{4} << 20;
// A write's records are copied by threads in pieces of this many bytes.
constexpr std::int64_t kCopyPieceBytes = std::int64_t{1} << 20;

}  // namespace

void PagesAhead::start(const std::vector<std::pair<void*, std::int64_t>>& ranges, int threads) {
  stop();
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const auto page = static_cast<std::uintptr_t>(page_size > 0 ? page_size : 4096);
  pieces_.clear();
  for (const auto& [data, bytes] : ranges) {
    // Whole pages only: the memory around an array is not this writer's to touch.
    const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + static_cast<std::uintptr_t>(std::max<std::int64_t>(0, bytes))) /
                     page * page;
    for (std::uintptr_t at = begin; at < end; at += kAheadPieceBytes)
      pieces_.emplace_back(reinterpret_cast<std::byte*>(at),
                           static_cast<std::int64_t>(std::min<std::uintptr_t>(kAheadPieceBytes, end - at)));
  }
  next_ = 0;
  stopped_ = false;
  const int wanted = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(0, threads)), pieces_.size()));
  for (int t = 0; t < wanted; ++t) {
    try {
      threads_.emplace_back([this] { run(); });
    } catch (const std::system_error&) {
      break;  // fewer helpers: the writes allocate their own pages
    }
  }
}

void PagesAhead::run() {
  for (std::size_t piece = next_++; piece < pieces_.size() && !stopped_; piece = next_++) {
    const auto& [at, bytes] = pieces_[piece];
    if (::madvise(at, static_cast<std::size_t>(bytes), MADV_POPULATE_WRITE) != 0) {
      stopped_ = true;  // an unknown advice (EINVAL) or no memory: the writes will tell
      return;
    }
  }
}

void PagesAhead::stop() {
  stopped_ = true;
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

ArrayInputFile::ArrayInputFile(BsrArrays arrays) : arrays_(std::move(arrays)) {
  const BsrArrays& a = arrays_;
  const std::string& name = a.name;
  if (a.m <= 0) throw InputError(name + ": the block size m = " + text(a.m) + " must be positive");
  if (a.m > kMaxSupportedBlockOrder)
    throw InputError(name + ": the block size m = " + text(a.m) + " exceeds the largest block order blockmm supports, " +
                     text(kMaxSupportedBlockOrder));
  if (a.n <= 0 || a.n > INT32_MAX)
    throw InputError(name + ": n = " + text(a.n) + " is outside blockmm's [1, " + text(INT32_MAX) + "]");
  if (a.n % a.m != 0)
    throw InputError(name + ": n = " + text(a.n) + " is not a multiple of the block size m = " + text(a.m));
  const std::int64_t p = a.n / a.m;
  if (a.indptr.size != p + 1)
    throw InputError(name + ": indptr has " + text(a.indptr.size) + " entries, n/m + 1 = " + text(p + 1) + " expected");
  if (a.indptr[0] != 0) throw InputError(name + ": indptr starts at " + text(a.indptr[0]) + ", not 0");
  for (std::int64_t r = 0; r < p; ++r)
    if (a.indptr[r + 1] < a.indptr[r])
      throw InputError(name + ": indptr decreases after block-row " + text(r) + " (" + text(a.indptr[r]) + " to " +
                       text(a.indptr[r + 1]) + ")");
  const std::int64_t k = a.indptr[p];
  if (k > a.indices.size || k > a.data_blocks)
    throw InputError(name + ": indptr ends at " + text(k) + " blocks, but indices holds " + text(a.indices.size) +
                     " and data " + text(a.data_blocks));
  if (k > INT32_MAX)
    throw InputError(name + ": " + text(k) + " blocks, more than blockmm's int32 block count holds");
  header_ = {static_cast<std::int32_t>(a.n), static_cast<std::int32_t>(a.m), k};
}

template <typename Emit>
void ArrayInputFile::for_each_block(RecordRange range, Emit&& emit) const {
  if (range.count <= 0) return;
  if (range.first < 0 || range.first + range.count > header_.k)
    throw Error(ExitCode::other, "internal error: blocks [" + text(range.first) + ", " + text(range.first + range.count) +
                                     ") read of " + text(header_.k));
  const IndexArray& indptr = arrays_.indptr;
  const std::int64_t p = header_.n / header_.m;
  // The block-row of the first block: the last row whose start is at most it (rows may be empty).
  std::int64_t lo = 0, hi = p;  // indptr[lo] <= first < indptr[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (indptr[mid] <= range.first ? lo : hi) = mid;
  }
  std::int64_t row = lo;
  for (std::int64_t q = range.first; q < range.first + range.count; ++q) {
    while (row + 1 < p && indptr[row + 1] <= q) ++row;
    const std::int64_t col = arrays_.indices[q];
    if (col < 0 || col >= p)
      throw InputError(arrays_.name + ": block " + text(q) + " (block-row " + text(row) + ") has block-column " + text(col) +
                       ", outside [0, " + text(p) + ")");
    emit(q, static_cast<std::int32_t>(row), static_cast<std::int32_t>(col));
  }
}

void ArrayInputFile::read_records_into(RecordRange range, std::byte* dest) {
  const std::int64_t stride = record_bytes<std::uint16_t>(header_.m);
  const std::int64_t values = std::int64_t{header_.m} * header_.m;
  for_each_block(range, [&](std::int64_t q, std::int32_t row, std::int32_t col) {
    std::byte* record = dest + (q - range.first) * stride;
    set_record_index(record, row, col);
    std::memcpy(record + 8, arrays_.data + q * values, static_cast<std::size_t>(values) * sizeof(std::uint16_t));
  });
}

InputRecords ArrayInputFile::read_records(RecordRange range) {
  InputRecords records;
  records.shape = header_.shape();
  records.bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, range.count) * records.stride()));
  read_records_into(range, records.bytes.data());
  return records;
}

void ArrayInputFile::read_keys(RecordRange range, std::int32_t* keys) {
  for_each_block(range, [&](std::int64_t q, std::int32_t row, std::int32_t col) {
    keys[2 * (q - range.first)] = row;
    keys[2 * (q - range.first) + 1] = col;
  });
}

std::string ArrayInputFile::locate_duplicate(std::int32_t i, std::int32_t j) const {
  if (i < 0 || i >= header_.n / header_.m) return "";
  // indptr is read again here, on an error's path, without the GIL: whatever the caller's memory
  // holds by now, only the k blocks the construction checked are looked at.
  const std::int64_t k = header_.k;
  const std::int64_t begin = std::clamp<std::int64_t>(arrays_.indptr[i], 0, k);
  const std::int64_t end = std::clamp<std::int64_t>(arrays_.indptr[i + 1], begin, k);
  std::vector<std::int64_t> found;
  for (std::int64_t q = begin; q < end && found.size() < 2; ++q)
    if (arrays_.indices[q] == j) found.push_back(q);
  if (found.size() < 2) return "";
  return " at blocks " + text(found[0]) + " and " + text(found[1]) + " of its arrays (0-based)";
}

void ArrayProductWriter::begin(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile,
                               const OutputLayout& pattern) {
  cancellation_.check();
  // One rank: its panel is the whole product.
  if (first_tile != 0 || total_tiles != pattern.tiles())
    throw Error(ExitCode::other, "internal error: the array writer holds one rank's whole product");
  shape_ = shape;
  tiles_ = total_tiles;
  labels_ = pattern.labels;
  wide_ = total_tiles > INT32_MAX;
  out_ = allocate_(total_tiles, wide_);
  const std::int64_t index_bytes = wide_ ? 8 : 4;
  ahead_.start({{out_.data, total_tiles * shape.block_values() * 4}, {out_.indices, total_tiles * index_bytes}},
               prepare_threads_);
  // indptr[R] = the tiles of the panel's rows whose file index is below R (with compact labels
  // the panel holds one row pointer a label: rows without one hold no tiles).
  const std::int64_t p = shape.block_rows();
  const std::int64_t rows = pattern.row_end - pattern.row_begin;
  std::int64_t below = 0;
  for (std::int64_t r = 0; r <= p; ++r) {
    while (below < rows && pattern.file_index(pattern.row_begin + static_cast<std::int32_t>(below)) < r) ++below;
    set_index(out_.indptr, r, pattern.row_ptr[static_cast<std::size_t>(below)]);
  }
}

void ArrayProductWriter::write(std::int64_t first_tile, std::int64_t count, const std::byte* records) {
  cancellation_.check();
  if (out_.data == nullptr && count > 0) throw Error(ExitCode::other, "internal error: the array writer wrote before it began");
  if (first_tile < 0 || count < 0 || first_tile + count > tiles_)
    throw Error(ExitCode::other, "internal error: tiles [" + text(first_tile) + ", " + text(first_tile + count) +
                                     ") written of " + text(tiles_));
  const std::int64_t stride = record_bytes<std::uint32_t>(shape_.m);
  const std::int64_t values = shape_.block_values();
  const std::int64_t p = shape_.block_rows();
  const auto copy = [&](std::int64_t t) {
    const std::byte* record = records + t * stride;
    std::int64_t row = record_row(record), col = record_col(record);
    if (labels_ != nullptr) {
      row = labels_->at(static_cast<std::size_t>(row));
      col = labels_->at(static_cast<std::size_t>(col));
    }
    // indptr was written from the pattern: a record in another row would make a wrong matrix.
    const std::int64_t tile = first_tile + t;
    if (row < 0 || row >= p || col < 0 || col >= p || tile < indptr_at(row) || tile >= indptr_at(row + 1))
      throw Error(ExitCode::other, "internal error: tile " + text(tile) + " is block (" + text(row) + ", " + text(col) +
                                       "), outside its row's place in the output");
    set_index(out_.indices, tile, col);
    std::memcpy(out_.data + tile * values, record + 8, static_cast<std::size_t>(values) * sizeof(std::uint32_t));
  };
  // A large write is copied by the threads OpenMP gives the writing thread: all the cores where a
  // GPU computes; one where the cpu backend writes from inside its own region (nested: serial).
  const std::int64_t per_piece = std::max<std::int64_t>(1, kCopyPieceBytes / stride);
  const std::int64_t pieces = (count + per_piece - 1) / per_piece;
  ParallelFailure failure;
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (std::int64_t piece = 0; piece < pieces; ++piece)
    failure.run([&] {
      for (std::int64_t t = piece * per_piece; t < std::min(count, (piece + 1) * per_piece) && !failure.failed(); ++t) copy(t);
    });
  failure.rethrow_if_failed();
  bytes_written_ += count * stride;
}

}  // namespace blockmm::python
