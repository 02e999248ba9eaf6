// Writing C: every rank writes its own panel straight into the shared output file (never
// through one rank; on one node by several copying threads), into a temporary file that is
// renamed only when every rank succeeded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"
#include "core/record_sink.hpp"
#include "io/file_access.hpp"

namespace blockmm::io {

enum class OutputFormat { binary, hdf5 };

// `requested` is "auto" (by the target's extension: .h5 / .hdf5 -> HDF5), "bin"/"binary" or "h5"/"hdf5".
OutputFormat choose_output_format(const std::string& target, const std::string& requested);

// A target whose extension says another format than the one chosen: "" when it agrees (or says
// nothing), else a warning to print (.h5/.hdf5 written as binary, .bin written as HDF5: the
// option wins), naming `option` as the user gave it ("--format hdf5", "--to bin"). A .mtx or
// .npz target is a UsageError: blockmm-export writes those.
std::string output_name_warning(const std::string& target, OutputFormat chosen, const std::string& option);

// How the product is written, decided by the driver once (options and environment).
struct OutputPolicy {
  WritePolicy write;              // copying threads, huge folios (file_access.hpp)
  int prepare_ahead_threads = 0;  // threads that prepare the output's pages beside the compute (tmpfs)
  // HDF5 output in part files (docs/output.md): kPartsAuto, kPartsOff or a count (total over the
  // ranks, rounded up to a multiple of them). Binary output is always one file.
  int parts = kPartsOff;
  static constexpr int kPartsAuto = -1;
  static constexpr int kPartsOff = 0;
  static constexpr int kMaxParts = 4096;
};

// The policy for a rank of `rank_threads` threads: its writes (write_policy(), mapped_writer.hpp)
// and --parts ("auto", "off" or a count from 1 to kMaxParts; anything else is a UsageError).
OutputPolicy output_policy(const WritePolicy& write, int rank_threads, const std::string& parts);

// What the writer did, for --stats.
struct OutputReport {
  int parts = 0;                  // part files of an HDF5 output (0: one file)
  bool mapped = false;            // this rank's writes went through shared maps
  int threads = 1;                // copying threads
  std::int64_t huge_extents = 0;  // 2 MiB extents put in huge folios (this rank)
  std::int64_t small_extents = 0; // whole extents left in 4 KiB pages (this rank)
  std::string tmpfs_settings;     // tmpfs_huge_settings() of the output, "" elsewhere
};

class ProductWriter : public RecordSink {
 public:
  // Collective. This rank's panel has pattern.tiles() tiles starting at global tile
  // `first_tile` of `total_tiles`; the panels of ranks 0, 1, ... follow each other.
  virtual void begin(MatrixShape shape, std::int64_t total_tiles, std::int64_t first_tile,
                     const OutputLayout& pattern) = 0;
  // Collective: make the file durable and move it into place.
  virtual void finish() = 0;
  // Bytes this rank wrote.
  virtual std::int64_t bytes_written() const = 0;
  // After finish(): how this rank wrote.
  virtual OutputReport report() const = 0;
};

// Output records whose indices are compact labels (OutputLayout::labels), handed to a writer with
// the file's indices: copied piece by piece (a few MB at a time, at least one record) into a
// buffer it owns, so that memory stays bounded. Without labels the records pass through as they are.
class FileIndexPieces {
 public:
  using Emit = std::function<void(std::int64_t first, std::int64_t count, const std::byte* records)>;
  void reset(const std::vector<std::int32_t>* labels, std::int64_t stride) {
    labels_ = labels;
    stride_ = stride;
  }
  // Calls emit for [first, first + count) in consecutive pieces.
  void write(std::int64_t first, std::int64_t count, const std::byte* records, const Emit& emit);

 private:
  const std::vector<std::int32_t>* labels_ = nullptr;
  std::int64_t stride_ = 0;
  std::vector<std::byte> piece_;
};

// The report of a writer whose file is `file` (may be null: nothing written).
OutputReport output_report(const FileWriter* file, const std::string& tmpfs_settings);

// Collective: creates the temporary file beside `target`. Each rank copies its output into the
// file as `policy` says (maps_output(), mapped_writer.hpp); HDF5 output may be written in parts.
std::unique_ptr<ProductWriter> make_product_writer(OutputFormat format, const std::string& target,
                                                   const comm::Communicator& comm, const OutputPolicy& policy);

}  // namespace blockmm::io
