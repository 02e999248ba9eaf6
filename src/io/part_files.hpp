// The part files of a parted HDF5 output while they are written (src/io only; docs/output.md):
// which blocks each part holds, each rank's own parts (temporary files of its own, laid out with
// HDF5, written through their own writers, their pages prepared by the rank's preparing threads,
// so that the page cache takes the output into several files at once), the parts of neighbouring
// ranks a rank writes tiles of, and the commit: every rank renames its parts to their final names
// (never over an existing file), and only then rank 0 renames the main file over the target.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/product_writer.hpp"

namespace blockmm::io {

// How many parts each rank writes (0: one file). Collective in its inputs: every rank passes
// the same `policy`, `ranks`, `total_bytes`, `tmpfs` and `huge`, and its own `my_tiles`/`my_bytes`.
// auto: one file where the output goes into huge folios (`huge`: tmpfs where MADV_COLLAPSE works
// and they are wanted), whose page cache then takes one file near the separate files' pace
// (bench/NOTES.md items 33 and 41); else on tmpfs, from kAutoPartsMinBytes of output, where the
// rank prepares pages ahead (it has the cores): a part for each kAutoPartBytes of a rank's
// output, at most its copying threads. A count N: ceil(N / ranks) a rank. A rank never has more
// parts than tiles, nor more than kMaxWriteThreads.
constexpr std::int64_t kAutoPartsMinBytes = std::int64_t{1} << 30;
constexpr std::int64_t kAutoPartBytes = std::int64_t{256} << 20;
int parts_for_rank(const OutputPolicy& policy, int ranks, std::int64_t total_bytes, bool tmpfs, bool huge,
                   std::int64_t my_tiles, std::int64_t my_bytes);

class PartFiles {
 public:
  // Collective. `counts[r]` parts for rank r, whose panel holds tiles [first_tile[r], first_tile[r]
  // + tiles[r]) of the product (each rank's tiles split evenly among its parts). `target` is the
  // main output; `header` its header (nnzb the product's).
  // `huge`: the parts go into huge folios (their pages are then prepared front first).
  PartFiles(const std::string& target, const comm::Communicator& comm, const BsrHeader& header,
            const std::vector<std::int64_t>& counts, const std::vector<std::int64_t>& first_tile,
            const std::vector<std::int64_t>& tiles, const OutputPolicy& policy, bool huge);
  ~PartFiles();  // removes this rank's temporaries, or its committed parts unless confirm()ed
  PartFiles(const PartFiles&) = delete;
  PartFiles& operator=(const PartFiles&) = delete;

  const std::string& generation() const { return generation_; }
  const std::vector<BsrPartSpec>& specs() const { return specs_; }

  // Blocks [first, first + count) of the product (a range inside one rank's tiles, own or a
  // neighbour's) from output records of the header's width, each piece passed to `check` first
  // (records numbered from 0 here): false where it refused some.
  bool write(std::int64_t first, std::int64_t count, const std::byte* records, const RecordCheck& check = nullptr);
  // Collective: every writer synced and closed.
  void close();
  // Collective: each rank renames its parts to their final names with `mode` (the main file's
  // permissions), never over an existing file.
  void commit(unsigned mode);
  // The main file is in place: the parts stay.
  void confirm() { confirmed_ = true; }

  std::int64_t bytes_written() const { return written_; }
  OutputReport report() const;

 private:
  struct Part;
  Part& part_for(std::size_t k);
  // The rank's preparing threads (policy.prepare_ahead_threads) over its own parts' pages.
  void start_preparing(bool huge);
  void stop_preparing();

  const comm::Communicator& comm_;
  comm::Communicator single_;  // this rank alone: the parts' own AtomicOutputs
  std::string target_;
  BsrHeader header_;
  OutputPolicy policy_;
  std::string generation_;
  std::vector<BsrPartSpec> specs_;
  std::vector<int> owner_;                    // rank of each part
  std::vector<std::string> published_;        // each part's "temporary device inode indices data"
  std::map<std::size_t, std::unique_ptr<Part>> parts_;  // own parts, and neighbours' opened to write into
  std::vector<int> armed_;                    // other ranks' part temporaries registered for signal cleanup
  std::vector<std::pair<FileWriter*, std::int64_t>> ahead_steps_;  // own parts' steps, in the order taken
  std::atomic<std::size_t> next_step_{0};
  std::atomic<bool> stop_preparing_{false};
  std::vector<std::thread> preparers_;
  std::int64_t written_ = 0;
  bool committed_ = false;
  bool confirmed_ = false;
};

}  // namespace blockmm::io
