// The COL380 output file: rank 0 writes the header, every rank its records at
// 12 + (first global tile) * record size; offsets come from an exclusive scan of tile counts.
// Ranks write independently as chunks are computed: their ranges are large, contiguous and
// disjoint, and collective writes would lock ranks with different chunk counts into step. On one
// node each rank copies into a shared map of the file, reserved at begin(), with several threads
// (mapped_writer.hpp); across nodes through MPI_File_write_at.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/mapped_writer.hpp"
#include "io/product_writer.hpp"

namespace blockmm::io {

std::unique_ptr<ProductWriter> make_hdf5_product_writer(const std::string& target, const comm::Communicator& comm,
                                                        const OutputPolicy& policy);

namespace {

class BinaryProductWriter final : public ProductWriter {
 public:
  BinaryProductWriter(const std::string& target, const comm::Communicator& comm, const OutputPolicy& policy)
      : comm_(comm), output_(target, comm), policy_(policy) {}

  // Collective: the file's size is known from here on, so its storage is reserved here. `shape`
  // is the file's; with labels, the pattern's and the records' indices are mapped back.
  void begin(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile, const OutputLayout& pattern) override {
    stride_ = record_bytes<std::uint32_t>(shape.m);
    first_tile_ = first_tile;
    pieces_.reset(pattern.labels, stride_);
    comm_.run_phase([&] {
      if (total_tiles > std::numeric_limits<std::int32_t>::max())
        throw OutputError(output_.target() + ": the product has " + std::to_string(total_tiles) +
                          " non-zero blocks, more than the binary format's int32 k can hold; write HDF5 (.h5) instead");
      output_.check_not_replaced();  // fail before the numeric phase, not after it
    });
    settings_ = output_.tmpfs_huge_settings();
    file_ = output_.open_writer(kHeaderBytes + total_tiles * stride_, policy_.write, false);
    // This rank's records, prepared ahead beside the compute (tmpfs; mapped_writer.hpp).
    file_->prepare_ahead({{kHeaderBytes + first_tile * stride_, pattern.tiles() * stride_}}, policy_.prepare_ahead_threads);
    comm_.run_phase([&] {
      if (!comm_.is_root()) return;
      const std::int32_t header[3] = {shape.n, shape.m, static_cast<std::int32_t>(total_tiles)};
      file_->write_at(0, header, sizeof header);
      written_ += sizeof header;
    });
  }

  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    pieces_.write(first_tile, count, records, [this](std::int64_t first, std::int64_t c, const std::byte* bytes) {
      file_->write_at(kHeaderBytes + (first_tile_ + first) * stride_, bytes, c * stride_);
      written_ += c * stride_;
    });
  }

  void finish() override {
    comm_.run_phase([&] {
      if (!file_) throw Error(ExitCode::other, "internal error: the binary writer finished before it began");
      file_->sync_and_close();
    });
    output_.commit();
  }

  std::int64_t bytes_written() const override { return written_; }
  OutputReport report() const override { return output_report(file_.get(), settings_); }

 private:
  const comm::Communicator& comm_;
  AtomicOutput output_;
  OutputPolicy policy_;
  std::string settings_;  // tmpfs_huge_settings() of the temporary
  std::unique_ptr<FileWriter> file_;
  std::int64_t stride_ = 0;
  std::int64_t first_tile_ = 0;
  FileIndexPieces pieces_;
  std::atomic<std::int64_t> written_{0};
};

}  // namespace

void FileIndexPieces::write(std::int64_t first, std::int64_t count, const std::byte* records, const Emit& emit) {
  if (labels_ == nullptr) {
    emit(first, count, records);
    return;
  }
  constexpr std::int64_t kPieceBytes = std::int64_t{4} << 20;
  const std::int64_t per_piece = std::max<std::int64_t>(1, kPieceBytes / stride_);
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t c = std::min(per_piece, count - done);
    piece_.resize(static_cast<std::size_t>(c * stride_));
    std::memcpy(piece_.data(), records + done * stride_, piece_.size());
    for (std::int64_t t = 0; t < c; ++t) {
      std::byte* record = piece_.data() + t * stride_;
      set_record_index(record, (*labels_)[static_cast<std::size_t>(record_row(record))],
                       (*labels_)[static_cast<std::size_t>(record_col(record))]);
    }
    emit(first + done, c, piece_.data());
    done += c;
  }
}

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

OutputFormat choose_output_format(const std::string& target, const std::string& requested) {
  if (requested == "bin" || requested == "binary") return OutputFormat::binary;
  if (requested == "h5" || requested == "hdf5") return OutputFormat::hdf5;
  if (requested != "auto") throw UsageError("unknown output format '" + requested + "' (expected auto, bin or h5)");
  return ends_with(target, ".h5") || ends_with(target, ".hdf5") ? OutputFormat::hdf5 : OutputFormat::binary;
}

std::string output_name_warning(const std::string& target, OutputFormat chosen) {
  for (const char* foreign : {".mtx", ".npz"})
    if (ends_with(target, foreign))
      throw UsageError(target + ": blockmm writes the COL380 binary format or HDF5, not " + foreign +
                       "; write .bin or .h5 and convert it with blockmm-export");
  const bool named_hdf5 = ends_with(target, ".h5") || ends_with(target, ".hdf5");
  if (named_hdf5 && chosen == OutputFormat::binary)
    return target + ": the name says HDF5, but --format bin writes the COL380 binary format";
  if (ends_with(target, ".bin") && chosen == OutputFormat::hdf5)
    return target + ": the name says COL380 binary, but --format h5 writes HDF5";
  return "";
}

std::unique_ptr<ProductWriter> make_product_writer(OutputFormat format, const std::string& target,
                                                   const comm::Communicator& comm, const OutputPolicy& policy) {
  if (format == OutputFormat::hdf5) return make_hdf5_product_writer(target, comm, policy);
  return std::make_unique<BinaryProductWriter>(target, comm, policy);
}

OutputReport output_report(const FileWriter* file, const std::string& tmpfs_settings) {
  OutputReport report;
  report.tmpfs_settings = tmpfs_settings;
  if (file == nullptr) return report;
  const WriterReport w = file->report();
  report.mapped = w.mapped;
  report.threads = w.threads;
  report.huge_extents = w.huge_extents;
  report.small_extents = w.small_extents;
  return report;
}

OutputPolicy output_policy(const WritePolicy& write, int rank_threads, const std::string& parts) {
  OutputPolicy policy;
  policy.write = write;
  // Only where the rank has cores to spare: on 2 cores the preparing threads would take them from the compute.
  policy.prepare_ahead_threads = rank_threads >= kMinDefaultMapThreads ? policy.write.threads : 0;
  if (parts == "auto") {
    policy.parts = OutputPolicy::kPartsAuto;
  } else if (parts == "off") {
    policy.parts = OutputPolicy::kPartsOff;
  } else {
    char* end = nullptr;
    errno = 0;
    const long count = std::strtol(parts.c_str(), &end, 10);
    if (parts.empty() || errno != 0 || *end != '\0' || count < 1 || count > OutputPolicy::kMaxParts)
      throw UsageError("--parts '" + quoted_value(parts) + "' must be auto, off or a count from 1 to " +
                       std::to_string(OutputPolicy::kMaxParts));
    policy.parts = static_cast<int>(count);
  }
  return policy;
}

}  // namespace blockmm::io
