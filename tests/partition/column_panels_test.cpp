// partition/column_panels: B's panels read from its file, once a panel. The file is read again for
// each panel, so a file changed between two passes (another program writing it) must be bad input
// naming B (exit 3), as partition's exchange says it, never an internal error (exit 1) nor, where
// the change adds blocks past the panel's last, a panel built silently from the old count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "partition/column_panels.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::partition {
namespace {

// B's file as the panels see it: records that the test replaces between passes, read in order
// only (HDF5's reads) or from any thread.
class ChangingFile final : public RecordSource {
 public:
  ChangingFile(InputRecords records, bool concurrent) : records_(std::move(records)), concurrent_(concurrent) {}
  MatrixShape shape() const override { return records_.shape; }
  std::int64_t size() const override { return records_.size(); }
  bool concurrent() const override { return concurrent_; }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    reads += count;
    if (count > 0) std::memcpy(dest, records_.record(first), static_cast<std::size_t>(count * stride()));
  }
  InputRecords take() override { return records_; }
  InputRecords records_;
  mutable std::atomic<std::int64_t> reads{0};  // records read so far

 private:
  bool concurrent_;
};

// Random records of n 64, m 2 in file order (by block-row), every one of the 32 columns used.
InputRecords b_records() {
  std::mt19937_64 rng(51);
  testing::RandomSpec spec;
  spec.n = 64;
  spec.m = 2;
  spec.density = 0.4;
  spec.shuffle = false;
  return testing::random_blocks(spec, rng);
}

struct Panels {
  std::shared_ptr<ChangingFile> file;
  std::vector<std::int32_t> cut;
  std::vector<std::unique_ptr<RecordSource>> panels;
};

Panels cut_in_panels(bool concurrent) {
  Panels p;
  p.file = std::make_shared<ChangingFile>(b_records(), concurrent);
  const ColumnCounts counts = column_counts(*p.file, {}, std::vector<std::int64_t>(32, 1));
  p.cut = column_cut(counts, 4, 0);
  p.panels = panels_in_file(p.file, {}, p.cut, counts, "B.bin");
  return p;
}

// A panel's records as a build reads them: whole (take), or in order in pieces of 7.
InputRecords read_panel(RecordSource& panel, bool in_pieces) {
  if (!in_pieces) return panel.take();
  InputRecords out;
  out.shape = panel.shape();
  out.bytes.resize(static_cast<std::size_t>(panel.size() * panel.stride()));
  for (std::int64_t first = 0; first < panel.size(); first += 7)
    panel.read(first, std::min<std::int64_t>(7, panel.size() - first), out.bytes.data() + first * panel.stride());
  return out;
}

// The message of the InputError a read of `panel` throws, or "" where it reads.
std::string refusal(RecordSource& panel, bool in_pieces) {
  try {
    read_panel(panel, in_pieces);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(ColumnPanels, EachPanelHoldsExactlyItsColumnsRecords) {
  for (const bool concurrent : {false, true})
    for (const bool in_pieces : {false, true}) {
      Panels p = cut_in_panels(concurrent);
      std::int64_t total = 0;
      for (std::size_t q = 0; q < p.panels.size(); ++q) {
        const InputRecords got = read_panel(*p.panels[q], in_pieces && !concurrent);
        total += got.size();
        for (std::int64_t r = 0; r < got.size(); ++r) {
          EXPECT_GE(record_col(got.record(r)), p.cut[q]);
          EXPECT_LT(record_col(got.record(r)), p.cut[q + 1]);
        }
      }
      EXPECT_EQ(total, p.file->size());
    }
}

TEST(ColumnPanels, AFileChangedBetweenPassesIsBadInputNamingB) {
  for (const bool concurrent : {false, true})
    for (const bool in_pieces : {false, true}) {
      if (concurrent && in_pieces) continue;  // pieces are read in order only where the file's reads are
      SCOPED_TRACE(std::string(concurrent ? "concurrent" : "in order") + (in_pieces ? ", in pieces" : ", whole"));
      // A block of the second panel gone.
      Panels fewer = cut_in_panels(concurrent);
      InputRecords& held = fewer.file->records_;
      for (std::int64_t r = 0; r < held.size(); ++r)
        if (record_col(held.record(r)) >= fewer.cut[1] && record_col(held.record(r)) < fewer.cut[2]) {
          held.bytes.erase(held.bytes.begin() + r * held.stride(), held.bytes.begin() + (r + 1) * held.stride());
          break;
        }
      EXPECT_EQ(refusal(*fewer.panels[0], in_pieces), "") << "the first panel's blocks did not change";
      const std::string said = refusal(*fewer.panels[1], in_pieces);
      EXPECT_EQ(said.rfind("B.bin: the file changed while it was read (fewer blocks in block-columns [", 0), 0u) << said;
      // A block of the first panel added past the file's last: a pass in order has taken all it
      // counted before it gets there.
      Panels more = cut_in_panels(concurrent);
      InputRecords& grown = more.file->records_;
      std::vector<std::byte> extra(grown.record(0), grown.record(0) + grown.stride());
      set_record_index(extra.data(), 31, more.cut[0]);
      grown.bytes.insert(grown.bytes.end(), extra.begin(), extra.end());
      const std::string also = refusal(*more.panels[0], in_pieces);
      EXPECT_EQ(also.rfind("B.bin: the file changed while it was read (more blocks in block-columns [", 0), 0u) << also;
    }
}

// A panel without blocks would cost its builds, each a pass over B's file, for nothing: ranges of
// columns without blocks go to a neighbour, and a panel of no record reads nothing.
TEST(ColumnPanels, NoPanelIsEmptyAndAnEmptyOneReadsNothing) {
  for (const bool concurrent : {false, true}) {
    InputRecords records = b_records();
    InputRecords narrow;  // only columns 4 to 11 hold blocks
    narrow.shape = records.shape;
    for (std::int64_t r = 0; r < records.size(); ++r)
      if (record_col(records.record(r)) >= 4 && record_col(records.record(r)) < 12)
        narrow.bytes.insert(narrow.bytes.end(), records.record(r), records.record(r) + records.stride());
    auto file = std::make_shared<ChangingFile>(narrow, concurrent);
    const ColumnCounts counts = column_counts(*file, {}, std::vector<std::int64_t>(32, 1));
    for (const std::int64_t max_blocks : {std::int64_t{0}, std::int64_t{5}}) {
      const std::vector<std::int32_t> cut = column_cut(counts, 16, max_blocks);
      EXPECT_EQ(cut.front(), 0);
      EXPECT_EQ(cut.back(), 32);
      for (std::size_t q = 0; q + 1 < cut.size(); ++q) {
        std::int64_t blocks = 0;
        for (std::int32_t j = cut[q]; j < cut[q + 1]; ++j) blocks += counts.blocks[static_cast<std::size_t>(j)];
        EXPECT_GT(blocks, 0) << "panel " << q << ": columns [" << cut[q] << ", " << cut[q + 1] << ")";
      }
    }
    // No row taken: one panel, of no record, which a build reads without a pass over the file.
    const std::vector<char> no_rows(32, 0);
    const ColumnCounts none = column_counts(*file, no_rows, std::vector<std::int64_t>(32, 1));
    const std::vector<std::int32_t> one = column_cut(none, 4, 0);
    EXPECT_EQ(one, (std::vector<std::int32_t>{0, 32}));
    std::vector<std::unique_ptr<RecordSource>> panels = panels_in_file(file, no_rows, one, none, "B.bin");
    file->reads = 0;
    EXPECT_EQ(read_panel(*panels[0], false).size(), 0);
    EXPECT_EQ(read_panel(*panels[0], !concurrent).size(), 0);
    EXPECT_EQ(file->reads.load(), 0) << "a panel of no record scanned B's file";
  }
}

}  // namespace
}  // namespace blockmm::partition
