#include "partition/column_panels.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/large_buffer.hpp"
#include "core/parallel_failure.hpp"
#include "partition/work.hpp"

namespace blockmm::partition {
namespace {

// Records a read of a source takes at most: a MiB, so that a pass holds little beside it.
std::int64_t records_a_piece(const RecordSource& source) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 20) / source.stride());
}

// Calls visit(record) for every record of `source`, in order, read in pieces.
template <typename Visit>
void for_each_record(const RecordSource& source, Visit&& visit) {
  const std::int64_t stride = source.stride(), per_piece = records_a_piece(source);
  LargeVector<std::byte> piece;
  for (std::int64_t first = 0; first < source.size(); first += per_piece) {
    const std::int64_t count = std::min(per_piece, source.size() - first);
    piece.resize(static_cast<std::size_t>(count * stride));
    source.read(first, count, piece.data());
    for (std::int64_t q = 0; q < count; ++q) visit(piece.data() + q * stride);
  }
}

// The records of `all` at `index`, in that order.
class IndexedPanel final : public RecordSource {
 public:
  IndexedPanel(std::shared_ptr<const InputRecords> all, std::vector<std::int64_t> index)
      : all_(std::move(all)), index_(std::move(index)) {}
  MatrixShape shape() const override { return all_->shape; }
  std::int64_t size() const override { return static_cast<std::int64_t>(index_.size()); }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    const std::int64_t stride = all_->stride();
    for (std::int64_t q = 0; q < count; ++q)
      std::memcpy(dest + q * stride, all_->record(index_[static_cast<std::size_t>(first + q)]), static_cast<std::size_t>(stride));
  }
  InputRecords take() override {
    InputRecords out;
    out.shape = shape();
    out.bytes.resize(static_cast<std::size_t>(size() * stride()));
    read(0, size(), out.bytes.data());
    return out;
  }

 private:
  std::shared_ptr<const InputRecords> all_;
  std::vector<std::int64_t> index_;
};

// What the panels of one file share: the file, its name, the rows taken, and one reader at a
// time where the file's reads are not thread-safe (HDF5).
struct ScannedFile {
  std::shared_ptr<RecordSource> file;
  std::string name;
  std::vector<char> rows;
  std::mutex lock;
};

// The records of a file in the panel's columns (and the rows taken), found by reading the file.
class ScannedPanel final : public RecordSource {
 public:
  ScannedPanel(std::shared_ptr<ScannedFile> file, std::int32_t col_begin, std::int32_t col_end, std::int64_t records)
      : file_(std::move(file)), col_begin_(col_begin), col_end_(col_end), records_(records) {}
  MatrixShape shape() const override { return file_->file->shape(); }
  std::int64_t size() const override { return records_; }
  bool concurrent() const override { return false; }
  // A read that continues the last one continues its scan; any other starts a new one.
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    if (records_ == 0) return;  // nothing to find: no pass over the file
    const std::int64_t stride = stride_of();
    if (first != taken_) taken_ = next_ = piece_at_ = piece_records_ = 0;
    while (count > 0) {
      if (piece_at_ == piece_records_) next_piece();
      const std::byte* record = piece_.data() + piece_at_++ * stride;
      if (!keeps(record) || taken_++ < first) continue;
      std::memcpy(dest, record, static_cast<std::size_t>(stride));
      dest += stride;
      --count;
    }
    if (taken_ == records_) {  // the pass is over once the rest of the file holds none of the panel's
      while (next_ < file_->file->size() || piece_at_ < piece_records_) {
        if (piece_at_ == piece_records_) next_piece();
        if (keeps(piece_.data() + piece_at_++ * stride)) changed("more blocks");
      }
      piece_ = LargeVector<std::byte>();
      piece_at_ = piece_records_ = 0;
    }
  }
  // The whole panel: the file's pieces read by the threads where its reads are thread-safe, each
  // piece's records of the panel appended where they land (the order of a panel's records
  // matters to no build: each sorts its rows).
  InputRecords take() override {
    InputRecords out;
    out.shape = shape();
    out.bytes.resize(static_cast<std::size_t>(size() * stride()));
    const RecordSource& file = *file_->file;
    if (!file.concurrent() || records_ == 0) {
      read(0, size(), out.bytes.data());
      return out;
    }
    const std::int64_t stride = stride_of(), per_piece = records_a_piece(file);
    const std::int64_t pieces = (file.size() + per_piece - 1) / per_piece;
    std::atomic<std::int64_t> filled{0};
    ParallelFailure failure;
#pragma omp parallel if (pieces > 1)
    {
      LargeVector<std::byte> piece, kept;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t c = 0; c < pieces; ++c) {
        if (failure.failed()) continue;
        failure.run([&] {
          const std::int64_t count = std::min(per_piece, file.size() - c * per_piece);
          piece.resize(static_cast<std::size_t>(count * stride));
          file.read(c * per_piece, count, piece.data());
          kept.clear();
          for (std::int64_t q = 0; q < count; ++q)
            if (keeps(piece.data() + q * stride)) kept.insert(kept.end(), piece.data() + q * stride, piece.data() + (q + 1) * stride);
          const std::int64_t n = static_cast<std::int64_t>(kept.size()) / stride;
          const std::int64_t at = filled.fetch_add(n);
          if (at + n > records_) changed("more blocks");
          if (n > 0) std::memcpy(out.bytes.data() + at * stride, kept.data(), kept.size());
        });
      }
    }
    failure.rethrow_if_failed();
    if (filled.load() != records_) changed("fewer blocks");
    return out;
  }

 private:
  std::int64_t stride_of() const { return record_bytes<std::uint16_t>(shape().m); }
  bool keeps(const std::byte* record) const {
    const std::int32_t row = record_row(record), col = record_col(record);
    return col >= col_begin_ && col < col_end_ && (file_->rows.empty() || file_->rows[static_cast<std::size_t>(row)] != 0);
  }
  // B is read again for each panel: a file that changed since its blocks were counted (another
  // program writing it) is bad input, named, as partition's exchange names it.
  [[noreturn]] void changed(const char* how) const {
    throw InputError(file_->name + ": the file changed while it was read (" + how + " in block-columns [" +
                     std::to_string(col_begin_) + ", " + std::to_string(col_end_) + ") than " +
                     std::to_string(records_) + " when they were counted)");
  }
  void next_piece() const {
    const RecordSource& file = *file_->file;
    if (next_ == file.size()) changed("fewer blocks");
    piece_records_ = std::min(records_a_piece(file), file.size() - next_);
    piece_.resize(static_cast<std::size_t>(piece_records_ * stride_of()));
    {
      std::unique_lock<std::mutex> one_reader(file_->lock, std::defer_lock);
      if (!file.concurrent()) one_reader.lock();
      file.read(next_, piece_records_, piece_.data());
    }
    next_ += piece_records_;
    piece_at_ = 0;
  }

  std::shared_ptr<ScannedFile> file_;
  std::int32_t col_begin_, col_end_;
  std::int64_t records_;
  // The scan: records of the panel handed out, the file's next record, the piece in hand.
  mutable std::int64_t taken_ = 0, next_ = 0, piece_at_ = 0, piece_records_ = 0;
  mutable LargeVector<std::byte> piece_;
};

}  // namespace

std::vector<std::int64_t> blocks_per_column(const RecordSource& records) {
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(records.shape().block_rows()), 0);
  for_each_record(records, [&](const std::byte* record) { ++blocks[static_cast<std::size_t>(record_col(record))]; });
  return blocks;
}

ColumnCounts column_counts(const RecordSource& b, const std::vector<char>& rows,
                           const std::vector<std::int64_t>& a_per_column) {
  ColumnCounts counts;
  counts.blocks.assign(static_cast<std::size_t>(b.shape().block_rows()), 0);
  counts.work = counts.blocks;
  for_each_record(b, [&](const std::byte* record) {
    const auto row = static_cast<std::size_t>(record_row(record)), col = static_cast<std::size_t>(record_col(record));
    if (!rows.empty() && rows[row] == 0) return;
    ++counts.blocks[col];
    counts.work[col] += 1 + a_per_column[row];
  });
  return counts;
}

namespace {

// `cut` without ranges that hold no block, each merged into the range before it (those before
// the first block into the first that holds one): an empty panel would cost its builds (on a
// file, two passes over it) for nothing. One range where no column holds a block.
std::vector<std::int32_t> without_empty_ranges(const std::vector<std::int32_t>& cut, const ColumnCounts& counts) {
  std::vector<std::int32_t> out{cut.front()};
  bool holds = false;  // the range begun last holds a block
  for (std::size_t q = 0; q + 1 < cut.size(); ++q) {
    std::int64_t blocks = 0;
    for (std::int32_t j = cut[q]; j < cut[q + 1]; ++j) blocks += counts.blocks[static_cast<std::size_t>(j)];
    if (blocks == 0) continue;
    if (holds) out.push_back(cut[q]);
    holds = true;
  }
  out.push_back(cut.back());
  return out;
}

}  // namespace

std::vector<std::int32_t> column_cut(const ColumnCounts& counts, int panels, std::int64_t max_blocks) {
  const std::vector<std::int32_t> even = balanced_ranges(counts.work, panels);
  if (max_blocks <= 0) return without_empty_ranges(even, counts);
  std::vector<std::int32_t> cut{0};
  for (std::size_t q = 0; q + 1 < even.size(); ++q) {
    std::int64_t held = 0;
    for (std::int32_t j = even[q]; j < even[q + 1]; ++j) {
      const std::int64_t blocks = counts.blocks[static_cast<std::size_t>(j)];
      if (held > 0 && held + blocks > max_blocks) {
        cut.push_back(j);
        held = 0;
      }
      held += blocks;
    }
    cut.push_back(even[q + 1]);
  }
  return without_empty_ranges(cut, counts);
}

std::vector<std::unique_ptr<RecordSource>> panels_in_memory(std::shared_ptr<const InputRecords> records,
                                                            const std::vector<std::int32_t>& cut) {
  const std::size_t panels = cut.size() - 1;
  std::vector<int> panel_of(static_cast<std::size_t>(records->shape.block_rows()), 0);
  for (std::size_t q = 0; q < panels; ++q)
    std::fill(panel_of.begin() + cut[q], panel_of.begin() + cut[q + 1], static_cast<int>(q));
  std::vector<std::vector<std::int64_t>> index(panels);
  for (std::int64_t q = 0; q < records->size(); ++q)
    index[static_cast<std::size_t>(panel_of[static_cast<std::size_t>(record_col(records->record(q)))])].push_back(q);
  std::vector<std::unique_ptr<RecordSource>> out;
  for (std::size_t q = 0; q < panels; ++q) out.push_back(std::make_unique<IndexedPanel>(records, std::move(index[q])));
  return out;
}

std::unique_ptr<RecordSource> rows_in_file(std::shared_ptr<RecordSource> file, std::vector<char> rows, std::int64_t records,
                                           std::string name) {
  const std::int32_t columns = file->shape().block_rows();
  auto shared = std::make_shared<ScannedFile>();
  shared->file = std::move(file);
  shared->name = std::move(name);
  shared->rows = std::move(rows);
  return std::make_unique<ScannedPanel>(std::move(shared), 0, columns, records);
}

std::vector<std::unique_ptr<RecordSource>> panels_in_file(std::shared_ptr<RecordSource> file, std::vector<char> rows,
                                                          const std::vector<std::int32_t>& cut,
                                                          const ColumnCounts& counts, std::string name) {
  auto shared = std::make_shared<ScannedFile>();
  shared->file = std::move(file);
  shared->name = std::move(name);
  shared->rows = std::move(rows);
  std::vector<std::unique_ptr<RecordSource>> out;
  for (std::size_t q = 0; q + 1 < cut.size(); ++q) {
    std::int64_t records = 0;
    for (std::int32_t j = cut[q]; j < cut[q + 1]; ++j) records += counts.blocks[static_cast<std::size_t>(j)];
    out.push_back(std::make_unique<ScannedPanel>(shared, cut[q], cut[q + 1], records));
  }
  return out;
}

}  // namespace blockmm::partition
