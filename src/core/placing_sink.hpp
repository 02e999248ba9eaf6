// Sinks over a sink: the tiles of one part of a panel (a backend's rows, a panel of B's
// block-columns, a neighbour's region) put at their places in the whole, and several threads'
// writes handed on one at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/record_sink.hpp"

namespace blockmm {

// The writer, one write at a time: a team's backends hand it their chunks from their own
// threads, and writers keep state between writes.
class SerialSink final : public RecordSink {
 public:
  explicit SerialSink(RecordSink& to) : to_(to) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    const std::lock_guard<std::mutex> hold(lock_);
    to_.write(first_tile, count, records);
  }

 private:
  RecordSink& to_;
  std::mutex lock_;
};

// A part's tiles, numbered from 0 in its own pattern (rows `row_ptr`), at their places in the
// whole: its tiles of row r start at `row_start[r]`, so a write is cut at the part's row ends,
// unless its rows follow each other there (then it is shifted whole).
class PlacingSink final : public RecordSink {
 public:
  PlacingSink(RecordSink& to, std::int64_t shift) : to_(to), shift_(shift) {}
  PlacingSink(RecordSink& to, std::int64_t record_bytes, const std::vector<std::int64_t>& row_ptr,
              std::vector<std::int64_t> row_start)
      : to_(to), stride_(record_bytes), row_ptr_(&row_ptr), row_start_(std::move(row_start)) {
    bool follow = true;
    for (std::size_t r = 0; r < row_start_.size() && follow; ++r) follow = row_start_[r] - row_start_[0] == row_ptr[r];
    if (follow) {
      shift_ = row_start_.empty() ? 0 : row_start_[0];
      row_ptr_ = nullptr;
    }
  }
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    if (row_ptr_ == nullptr) {
      to_.write(first_tile + shift_, count, records);
      return;
    }
    const std::vector<std::int64_t>& row_ptr = *row_ptr_;
    auto row = static_cast<std::size_t>(std::upper_bound(row_ptr.begin(), row_ptr.end(), first_tile) - row_ptr.begin() - 1);
    for (std::int64_t done = 0; done < count; ++row) {
      const std::int64_t tile = first_tile + done;
      const std::int64_t in_row = std::min(row_ptr[row + 1] - tile, count - done);
      if (in_row <= 0) continue;
      to_.write(row_start_[row] + (tile - row_ptr[row]), in_row, records + done * stride_);
      done += in_row;
    }
  }

 private:
  RecordSink& to_;
  std::int64_t stride_ = 0;
  std::int64_t shift_ = 0;
  const std::vector<std::int64_t>* row_ptr_ = nullptr;
  std::vector<std::int64_t> row_start_;
};

}  // namespace blockmm
