// The HDF5 product writer: C in the BSR layout (hdf5_bsr.hpp), written by every rank. At
// begin() rank 0 lays the file out with HDF5 (attributes, datasets of their final sizes, storage
// allocated) and closes it; then every rank writes its panel's indptr entries, block-columns and
// values straight into that storage, as the numeric phase hands over chunks, exactly as the
// binary writer does (a reserved shared map copied into by several threads on one node, MPI-IO
// across nodes). No rank buffers its panel or waits for another, and
// C is never gathered. All of it goes into the AtomicOutput temporary, renamed in finish() once
// every rank has succeeded.
// A parted output (--parts, docs/output.md) keeps /indptr in that file and the blocks in part
// files beside it, several a rank (part_files.hpp): the main file's /indices and /data are
// virtual datasets over them. The parts are renamed into place first, the main file last.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/mapped_writer.hpp"
#include "io/output_parts.hpp"
#include "io/part_files.hpp"
#include "io/product_writer.hpp"

namespace blockmm::io {

std::unique_ptr<ProductWriter> make_hdf5_product_writer(const std::string& target, const comm::Communicator& comm,
                                                        const OutputPolicy& policy);

namespace {

[[noreturn]] void internal(const std::string& what) { throw Error(ExitCode::other, "internal error: " + what); }

// Whether the file `path` names can take huge folios (huge_folios_possible, mapped_writer.hpp):
// rank 0's temporary through /proc/self/fd (AtomicOutput::path_for_library), only its file system
// asked about.
bool takes_huge_folios(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool huge = huge_folios_possible(fd);
  ::close(fd);
  return huge;
}

class Hdf5ProductWriter final : public ProductWriter {
 public:
  Hdf5ProductWriter(const std::string& target, const comm::Communicator& comm, const OutputPolicy& policy)
      : comm_(comm), output_(target, comm), policy_(policy) {
    // Part files need room for their names beside OUT's (output_parts.hpp): checked before the work.
    comm_.run_phase([&] {
      const std::size_t slash = target.rfind('/');
      const std::size_t length = target.size() - (slash == std::string::npos ? 0 : slash + 1);
      const std::size_t longest = longest_parted_base(temporary_host_tag());
      if (length <= longest || policy_.parts == OutputPolicy::kPartsOff) return;
      if (policy_.parts != OutputPolicy::kPartsAuto)
        throw UsageError(target + ": --parts needs an output name of at most " + std::to_string(longest) +
                         " bytes here, to name its part files");
      policy_.parts = OutputPolicy::kPartsOff;
    });
    if (output_.writes_in_place()) policy_.parts = OutputPolicy::kPartsOff;  // a device holds one stream
  }

  void begin(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile, const OutputLayout& pattern) override {
    // Collectives first, then checks inside run_phase: a rank that throws must not leave the
    // others waiting in a collective it skipped.
    const std::vector<std::int64_t> begins = comm_.gather_all(std::int64_t{pattern.first_file_row()});
    const std::vector<std::int64_t> ends = comm_.gather_all(std::int64_t{pattern.end_file_row()});
    const std::vector<std::int64_t> tiles = comm_.gather_all(pattern.tiles());
    comm_.run_phase([&] { check_panels(shape, total_tiles, first_tile, pattern, comm_.rank(), begins, ends, tiles); });

    header_.n = shape.n;
    header_.m = shape.m;
    header_.nnzb = total_tiles;
    header_.width = ValueWidth::u32;
    const std::int64_t value_bytes = static_cast<std::int64_t>(header_.width) * header_.block_values();
    // Parts: how many each rank writes (none: one file), knowing whether rank 0's temporary takes
    // huge folios (then one file).
    std::string huge;
    if (comm_.is_root()) huge = policy_.write.huge && takes_huge_folios(output_.path_for_library()) ? "huge" : "";
    comm_.broadcast(huge, 0);
    std::vector<std::int64_t> counts;
    comm_.run_phase([&] {
      const int mine = parts_for_rank(policy_, comm_.size(), total_tiles * (4 + value_bytes),
                                      !output_.tmpfs_huge_settings().empty(), !huge.empty(), pattern.tiles(),
                                      pattern.tiles() * (4 + value_bytes));
      counts = comm_.gather_all(std::int64_t{mine});
    });
    std::int64_t parts = 0;
    for (std::int64_t c : counts) parts += c;
    if (parts >= 2) {
      const std::vector<std::int64_t> firsts = comm_.gather_all(first_tile);
      part_files_ = std::make_unique<PartFiles>(output_.target(), comm_, header_, counts, firsts, tiles, policy_, !huge.empty());
    }

    std::string layout_text;
    comm_.run_phase([&] {
      if (!comm_.is_root()) return;
      std::int64_t metadata = 0;
      try {
        layout_text = (part_files_ != nullptr ? create_parted_bsr_file(output_.path_for_library(), output_.target(),
                                                                       header_, part_files_->specs(), &metadata)
                                              : create_bsr_file(output_.path_for_library(), output_.target(), header_, &metadata))
                          .encode();
      } catch (const OutputError&) {
        output_.check_not_replaced();  // the clearer reason, when it is one
        throw;
      }
      written_ += metadata;
    });
    comm_.broadcast(layout_text, 0);
    const BsrLayout layout = BsrLayout::decode(layout_text);

    // The datasets' storage ends the file (rank 0's fstat in open_writer covers any metadata after it).
    std::int64_t end = layout.indptr + 8 * (std::int64_t{header_.block_rows()} + 1);
    if (part_files_ == nullptr)
      end = std::max({end, layout.indices + 4 * header_.nnzb, layout.data + value_bytes * header_.nnzb});
    file_ = output_.open_writer(end, policy_.write, true);
    if (part_files_ == nullptr)  // this rank's blocks, prepared ahead beside the compute (tmpfs)
      file_->prepare_ahead({{layout.indices + 4 * first_tile, 4 * pattern.tiles()},
                            {layout.data + value_bytes * first_tile, value_bytes * pattern.tiles()}},
                           policy_.prepare_ahead_threads);
    comm_.run_phase([&] {
      content_ = std::make_unique<BsrContentWriter>(*file_, header_, layout);
      row_begin_ = pattern.row_begin;
      row_ptr_ = pattern.row_ptr;
      first_tile_ = first_tile;
      labels_ = pattern.labels;
      pieces_.reset(labels_, record_bytes<std::uint32_t>(header_.m));
      if (part_files_ != nullptr && comm_.is_root()) {
        // The main file's record of its parts, in its user block (output_parts.hpp).
        const std::string record = parts_user_block(part_files_->generation(), static_cast<int>(parts));
        file_->write_at(0, record.data(), static_cast<std::int64_t>(record.size()));
      }
      write_indptr(pattern);
    });
  }

  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    check_range(first_tile, count);
    // The records are checked as they are split, piece by piece on the copying threads, while a
    // piece is in the core's cache (a pass of its own over a chunk read it once more, on this
    // thread alone). With labels they are checked before their indices are mapped back.
    const bool checked_apart = labels_ != nullptr;
    if (checked_apart) check_records(first_tile, count, records);
    bool followed = true;
    pieces_.write(first_tile, count, records, [&](std::int64_t first, std::int64_t c, const std::byte* bytes) {
      RecordCheck check;
      if (!checked_apart)
        check = [this, first, bytes](std::int64_t t, std::int64_t n, const std::byte* keys) {
          return records_follow(first, bytes, t, n, keys);
        };
      followed = followed && (part_files_ != nullptr ? part_files_->write(first_tile_ + first, c, bytes, check)
                                                     : content_->write_records(first_tile_ + first, c, bytes, check));
    });
    if (!followed) {
      check_records(first_tile, count, records);  // says which record
      internal("the HDF5 writer's check refused records its second look accepts");
    }
    tiles_written_ += count;
    if (part_files_ == nullptr) written_ += count * (4 + 4 * header_.block_values());
  }

  void finish() override {
    // Every tile once: the ranks' writes add up to the product (tiles of shared rows are written
    // by whichever neighbour computed them; a panel's own tiles are checked against its pattern).
    const std::int64_t tiles = comm_.sum(tiles_written_);
    comm_.run_phase([&] {
      if (tiles != header_.nnzb)
        internal("the HDF5 writers received " + std::to_string(tiles) + " of the product's " +
                 std::to_string(header_.nnzb) + " blocks");
      file_->sync_and_close();
    });
    if (part_files_ == nullptr) {
      output_.commit();
      return;
    }
    // The parts first, under names no file had (never over one), with the main file's
    // permissions; then the main file over the target, taking the replaced output's parts with it.
    part_files_->close();
    std::string mode;
    if (comm_.is_root()) mode = std::to_string(output_.final_mode());
    comm_.broadcast(mode, 0);
    part_files_->commit(static_cast<unsigned>(std::stoul(mode)));
    AtomicOutput::CommitOptions options;
    options.kept_part_generation = part_files_->generation();
    output_.commit(options);
    part_files_->confirm();
  }

  std::int64_t bytes_written() const override {
    return written_ + (part_files_ != nullptr ? part_files_->bytes_written() : 0);
  }
  OutputReport report() const override {
    if (part_files_ != nullptr) return part_files_->report();
    return output_report(file_.get(), output_.tmpfs_huge_settings());
  }

 private:
  // The panels must tile [0, p) in rank order, and this rank's pattern must be a CSR of its
  // share of the blocks: indptr is built from them, so a mismatch would be a wrong matrix.
  static void check_panels(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile,
                           const OutputLayout& pattern, int rank, const std::vector<std::int64_t>& begins,
                           const std::vector<std::int64_t>& ends, const std::vector<std::int64_t>& tiles) {
    const std::size_t ranks = begins.size();
    std::int64_t sum = 0;
    std::int64_t before_mine = -1;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::int64_t expected_begin = r == 0 ? 0 : ends[r - 1];
      if (begins[r] != expected_begin || ends[r] < begins[r])
        internal("output panels do not cover the block-rows in rank order (rank " + std::to_string(r) + " holds [" +
                 std::to_string(begins[r]) + ", " + std::to_string(ends[r]) + "))");
      if (r == static_cast<std::size_t>(rank)) before_mine = sum;
      sum += tiles[r];
    }
    if (ends[ranks - 1] != shape.block_rows())
      internal("output panels end at block-row " + std::to_string(ends[ranks - 1]) + ", not " +
               std::to_string(shape.block_rows()));
    if (sum != total_tiles || before_mine != first_tile)
      internal("panel tile counts disagree with the total (" + std::to_string(total_tiles) + ") or this rank's offset (" +
               std::to_string(first_tile) + ")");
    if (pattern.labels != nullptr && (pattern.row_begin < 0 || static_cast<std::size_t>(pattern.row_end) > pattern.labels->size()))
      internal("the panel's rows [" + std::to_string(pattern.row_begin) + ", " + std::to_string(pattern.row_end) +
               ") are not among the " + std::to_string(pattern.labels->size()) + " labels");
    const std::size_t rows = static_cast<std::size_t>(pattern.row_end - pattern.row_begin);
    if (pattern.row_ptr.size() != rows + 1 || pattern.row_ptr.front() != 0 || pattern.row_ptr.back() != pattern.tiles())
      internal("the panel's tile pattern is not a CSR of its rows");
  }

  // This panel's entries of /indptr, global block offsets, for the file's block-rows it covers (the
  // last rank also writes the final entry), in bounded pieces: the file holds p + 1 entries
  // whatever the records, but with compact labels the panel holds one row pointer per label only.
  // indptr[R] = first_tile + row_ptr[the panel's rows whose file index is below R].
  void write_indptr(const OutputLayout& pattern) {
    constexpr std::int64_t kPieceEntries = std::int64_t{1} << 16;
    const std::int64_t first_row = pattern.first_file_row();
    const bool last = comm_.rank() == comm_.size() - 1;
    const std::int64_t count = std::int64_t{pattern.end_file_row()} - first_row + (last ? 1 : 0);
    const std::int64_t rows = pattern.row_end - pattern.row_begin;
    std::vector<std::int64_t> entries(static_cast<std::size_t>(std::min(count, kPieceEntries)));
    std::int64_t below = 0;  // the panel's rows whose file index is below the entry's row
    for (std::int64_t done = 0; done < count;) {
      const std::int64_t c = std::min(kPieceEntries, count - done);
      for (std::int64_t t = 0; t < c; ++t) {
        const std::int64_t row = first_row + done + t;
        while (below < rows && pattern.file_index(pattern.row_begin + static_cast<std::int32_t>(below)) < row) ++below;
        entries[static_cast<std::size_t>(t)] = first_tile_ + pattern.row_ptr[static_cast<std::size_t>(below)];
      }
      content_->write_indptr(first_row + done, entries.data(), c);
      written_ += 8 * c;
      done += c;
    }
  }

  // The records of one write must be tiles in order. Those of this panel must follow its pattern
  // (/indptr is written from the pattern and /indices from the records); tiles outside it (of a
  // neighbour's rows this rank computed, partition/row_sharing.hpp) must lie inside the product,
  // in the order of the file. Writes may come in any order, one at a time (possibly from a helper
  // thread); finish() checks that they add up.
  // The write's range: inside the panel or wholly outside it, inside the product.
  void check_range(std::int64_t first_tile, std::int64_t count) const {
    const std::int64_t panel_tiles = row_ptr_.back();
    const bool in_panel = first_tile >= 0 && first_tile + count <= panel_tiles;
    const bool in_product = first_tile_ + first_tile >= 0 && first_tile_ + first_tile + count <= header_.nnzb;
    const bool outside_panel = first_tile + count <= 0 || first_tile >= panel_tiles;
    if (count < 0 || !in_product || (!in_panel && !outside_panel))
      internal("the HDF5 writer got tiles [" + std::to_string(first_tile) + ", " + std::to_string(first_tile + count) +
               ") of a panel of " + std::to_string(panel_tiles) + " starting at " + std::to_string(first_tile_) +
               " of " + std::to_string(header_.nnzb));
  }

  // The records of a write (check_range passed) that start at tile `first_tile`: the first of
  // records [t0, t1) that does not follow (-1 where all do), record t0 - 1 the one before t0.
  // Thread-safe: called on the copying threads.
  std::int64_t first_stray(std::int64_t first_tile, const std::byte* records, std::int64_t t0, std::int64_t t1) const {
    const std::int64_t stride = record_bytes<std::uint32_t>(header_.m);
    const bool in_panel = first_tile >= 0 && first_tile < row_ptr_.back();
    // With labels, indices are labels: below their count (and so below p).
    const std::int64_t p = labels_ != nullptr ? static_cast<std::int64_t>(labels_->size()) : header_.block_rows();
    const std::int64_t panel_rows = static_cast<std::int64_t>(row_ptr_.size()) - 1;
    std::int64_t row = 0;  // the panel's row holding the tile (in_panel)
    if (in_panel && t1 > t0)
      row = std::upper_bound(row_ptr_.begin(), row_ptr_.end(), first_tile + t0) - row_ptr_.begin() - 1;
    std::int32_t previous_i = -1, previous_j = -1;
    if (t0 > 0) {
      previous_i = record_row(records + (t0 - 1) * stride);
      previous_j = record_col(records + (t0 - 1) * stride);
    }
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::byte* record = records + t * stride;
      const std::int32_t i = record_row(record);
      const std::int32_t j = record_col(record);
      bool follows = i >= 0 && i < p && j >= 0 && j < p && (i > previous_i || (i == previous_i && j > previous_j));
      if (in_panel) {
        while (row_ptr_[static_cast<std::size_t>(row) + 1] <= first_tile + t) ++row;
        follows = follows && i == row_begin_ + row;
      } else {
        follows = follows && (i < row_begin_ || i >= row_begin_ + panel_rows);
      }
      if (!follows) return t;
      previous_i = i;
      previous_j = j;
    }
    return -1;
  }

  // Whether records [t0, t0 + n) of a write starting at tile `first_tile` follow, as first_stray
  // says; `keys` holds their block-rows and block-columns (RecordCheck). The panel's own records
  // (every write but a neighbour's tiles) are checked from the keys, a row at a time, without a
  // branch a record: block-rows follow from the rows, so only each row's block-columns need to
  // ascend. Thread-safe.
  bool records_follow(std::int64_t first_tile, const std::byte* records, std::int64_t t0, std::int64_t n,
                      const std::byte* keys) const {
    if (first_tile < 0 || first_tile >= row_ptr_.back() || labels_ != nullptr) return first_stray(first_tile, records, t0, t0 + n) < 0;
    const std::int64_t stride = record_bytes<std::uint32_t>(header_.m);
    const std::int64_t p = header_.block_rows();
    auto row = static_cast<std::size_t>(std::upper_bound(row_ptr_.begin(), row_ptr_.end(), first_tile + t0) - row_ptr_.begin() - 1);
    bool follows = true;
    for (std::int64_t t = t0; t < t0 + n; ++row) {
      const std::int64_t row_end = std::min(t0 + n, row_ptr_[row + 1] - first_tile);
      const std::int64_t expected_i = row_begin_ + static_cast<std::int64_t>(row);
      // The block-column before: the row's previous tile where this write holds it, else none.
      std::int64_t previous_j = -1;
      if (t > 0 && first_tile + t > row_ptr_[row]) previous_j = record_col(records + (t - 1) * stride);
      for (; t < row_end; ++t) {
        std::int32_t key[2];
        std::memcpy(key, keys + 8 * (t - t0), sizeof key);
        const std::int64_t j = key[1];
        follows &= (key[0] == expected_i) & (j > previous_j) & (j < p);
        previous_j = j;
      }
    }
    return follows;
  }

  // The whole write, on this thread; an internal error naming the first record that does not follow.
  void check_records(std::int64_t first_tile, std::int64_t count, const std::byte* records) const {
    const std::int64_t t = first_stray(first_tile, records, 0, count);
    if (t < 0) return;
    const std::byte* record = records + t * record_bytes<std::uint32_t>(header_.m);
    internal("output tile " + std::to_string(first_tile + t) + " is block (" + std::to_string(record_row(record)) + ", " +
             std::to_string(record_col(record)) + "), which does not follow the panel's pattern");
  }

  const comm::Communicator& comm_;
  AtomicOutput output_;
  OutputPolicy policy_;
  std::unique_ptr<PartFiles> part_files_;  // a parted output's parts (destroyed after output_'s writer)
  std::unique_ptr<FileWriter> file_;
  std::unique_ptr<BsrContentWriter> content_;
  BsrHeader header_;
  std::int32_t row_begin_ = 0;
  std::vector<std::int64_t> row_ptr_{0};
  std::int64_t first_tile_ = 0;
  std::int64_t tiles_written_ = 0;  // write() calls come one at a time: no lock
  const std::vector<std::int32_t>* labels_ = nullptr;
  FileIndexPieces pieces_;
  std::atomic<std::int64_t> written_{0};
};

}  // namespace

std::unique_ptr<ProductWriter> make_hdf5_product_writer(const std::string& target, const comm::Communicator& comm,
                                                        const OutputPolicy& policy) {
  return std::make_unique<Hdf5ProductWriter>(target, comm, policy);
}

}  // namespace blockmm::io
