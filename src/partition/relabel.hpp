// Compact block labels for inputs whose n is huge against their records (issue 17): the block
// indices that occur anywhere in A or B (rows and columns of both) are labelled 0..d-1 in
// ascending order, and the whole pipeline (partition, build, symbolic, numeric) then runs on
// d block-rows instead of p = n/m, so that its row arrays follow the records, never n. The
// writers map labels back (OutputLayout::labels). One monotone map for every index keeps the
// product (A's column k and B's row k get the same label) and the output's (i, j) order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"

namespace blockmm::partition {

// Below this many block-rows the row arrays cost at most a few MB: never relabelled on "auto".
constexpr std::int64_t kRelabelMinRows = std::int64_t{1} << 16;
// On "auto", relabel when p exceeds this many times the records of A and B together: the row
// arrays (about 44 bytes a block-row) then cost more than the records themselves.
constexpr std::int64_t kRelabelRowsPerRecord = 4;

// `on` and `off` force the choice, so that tests can run the relabelled pipeline on small inputs
// and compare it with the plain one (settings: BLOCKMM_RELABEL).
enum class RelabelMode { automatic, on, off };

// Whether a run of p block-rows with these record counts relabels.
bool should_relabel(RelabelMode mode, std::int64_t p, std::int64_t a_records, std::int64_t b_records);

struct Relabelling {
  // labels[x] is the file's block index of label x; ascending, shared by every rank.
  std::shared_ptr<const std::vector<std::int32_t>> labels;
  // A and B with labels for indices, n = labels.size() * m: this rank's share of each file's
  // records (io::record_share), held in memory, which is all that distribute() reads of them.
  std::unique_ptr<io::InputFile> a;
  std::unique_ptr<io::InputFile> b;
};

// Collective. Reads this rank's share of both files (validated as always), gathers the distinct
// indices of every rank and relabels the records. Memory: this rank's share of the records
// (held, and copied once more as distribute() reads them) and up to 2 int32 an index per record
// of every rank (the exchanged sets).
Relabelling relabel(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm);

// The file's block-rows [first, second) that a panel of labelled rows [row_begin, row_end)
// covers: the panels of all ranks then tile [0, p) in order (rows between two labels go to
// the panel of the label above them; row_begin = 0 starts at 0, row_end = d ends at p).
std::pair<std::int32_t, std::int32_t> file_rows(const std::vector<std::int32_t>& labels, std::int32_t p,
                                                std::int32_t row_begin, std::int32_t row_end);

}  // namespace blockmm::partition
