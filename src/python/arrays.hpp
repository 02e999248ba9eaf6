// The arrays of a scipy.sparse BSR matrix as blockmm reads and writes them in a Python process:
// an input file whose records are read from the arrays' own buffers (no copy of the matrix is
// made before the backends build from it), and a product writer that fills arrays allocated once,
// at their final size, when the symbolic phase knows the product's block count.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/block_matrix.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "python/cancellation.hpp"

namespace blockmm::python {

using io::RecordRange;

// indptr and indices of a scipy matrix: int32 or int64, as scipy chooses.
struct IndexArray {
  const void* data = nullptr;
  bool wide = false;       // int64 (else int32)
  std::int64_t size = 0;   // entries
  std::int64_t operator[](std::int64_t i) const {
    return wide ? static_cast<const std::int64_t*>(data)[i] : static_cast<const std::int32_t*>(data)[i];
  }
};

// A BSR matrix's arrays, not owned: the caller keeps them alive and unchanged while they are read.
struct BsrArrays {
  std::string name;             // how messages name the operand ("A", "B")
  std::int64_t n = 0;           // order of the matrix
  std::int64_t m = 0;           // order of a block
  IndexArray indptr;            // n/m + 1 entries, from 0, never decreasing
  IndexArray indices;           // each block's block-column
  const std::uint16_t* data = nullptr;  // m*m values a block, row-major
  std::int64_t data_blocks = 0;         // blocks that `data` holds
};

// The matrix as an input file: its records are block (row, indices[q], data[q]) for q in file
// order. The shape and indptr are checked on construction (InputError naming the operand); each
// block-column as its record is read, so that no index is trusted that was not checked when used.
class ArrayInputFile final : public io::InputFile {
 public:
  explicit ArrayInputFile(BsrArrays arrays);
  const std::string& path() const override { return arrays_.name; }
  const FileHeader& header() const override { return header_; }
  std::string format_name() const override { return "scipy.sparse BSR arrays"; }
  InputRecords read_records(RecordRange range) override;
  void read_records_into(RecordRange range, std::byte* dest) override;
  bool concurrent_reads() const override { return true; }
  void read_keys(RecordRange range, std::int32_t* keys) override;
  std::string locate_duplicate(std::int32_t i, std::int32_t j) const override;

 private:
  // Calls emit(q, row, col) for blocks [range.first, range.first + range.count), columns checked.
  template <typename Emit>
  void for_each_block(RecordRange range, Emit&& emit) const;

  BsrArrays arrays_;
  FileHeader header_;
};

// Where the product goes: indptr (n/m + 1 entries) and indices (one a block) of the index type
// asked for, and the blocks' values (m*m uint32 each).
struct OutputArrays {
  void* indptr = nullptr;
  void* indices = nullptr;
  std::uint32_t* data = nullptr;
};
// Allocates the output for `blocks` blocks, int64 indices where `wide`; throws to stop the product.
using AllocateOutput = std::function<OutputArrays(std::int64_t blocks, bool wide)>;

// Fresh memory's pages allocated ahead of the writes that fill it, by threads of their own: a
// page's first touch (clearing it, filling page tables) costs a writer more than its copy does
// (bench/NOTES.md). madvise(MADV_POPULATE_WRITE) allocates without writing, so it runs beside
// the writes; pieces are handed out in order, so the threads keep ahead of writes in order. Where
// the kernel does not know the advice (before Linux 5.14), the writes allocate their own pages.
class PagesAhead {
 public:
  PagesAhead() = default;
  ~PagesAhead() { stop(); }
  PagesAhead(const PagesAhead&) = delete;
  PagesAhead& operator=(const PagesAhead&) = delete;
  // The whole pages of each range, on `threads` threads.
  void start(const std::vector<std::pair<void*, std::int64_t>>& ranges, int threads);
  void stop();  // joins the threads, done or not

 private:
  void run();
  std::vector<std::pair<std::byte*, std::int64_t>> pieces_;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> stopped_{false};
  std::vector<std::thread> threads_;
};

// The product into arrays (one rank: its panel is the whole product). indptr is written at
// begin() from the pattern, each block's column and values as its records arrive, in any order;
// `prepare_threads` threads allocate the arrays' pages ahead of the writes. The cancellation is
// checked at begin() and before each write.
class ArrayProductWriter final : public io::ProductWriter {
 public:
  ArrayProductWriter(AllocateOutput allocate, Cancellation cancellation, int prepare_threads = 0)
      : allocate_(std::move(allocate)), cancellation_(cancellation), prepare_threads_(prepare_threads) {}
  void begin(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile, const OutputLayout& pattern) override;
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override;
  void finish() override { ahead_.stop(); }
  std::int64_t bytes_written() const override { return bytes_written_; }
  io::OutputReport report() const override { return {}; }

 private:
  void set_index(void* array, std::int64_t at, std::int64_t value) const {
    if (wide_)
      static_cast<std::int64_t*>(array)[at] = value;
    else
      static_cast<std::int32_t*>(array)[at] = static_cast<std::int32_t>(value);
  }
  std::int64_t indptr_at(std::int64_t row) const {
    return wide_ ? static_cast<const std::int64_t*>(out_.indptr)[row] : static_cast<const std::int32_t*>(out_.indptr)[row];
  }

  AllocateOutput allocate_;
  Cancellation cancellation_;
  int prepare_threads_;
  PagesAhead ahead_;
  OutputArrays out_;
  bool wide_ = false;
  MatrixShape shape_;
  std::int64_t tiles_ = 0;
  const std::vector<std::int32_t>* labels_ = nullptr;
  std::int64_t bytes_written_ = 0;
};

}  // namespace blockmm::python
