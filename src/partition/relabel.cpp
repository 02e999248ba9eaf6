#include "partition/relabel.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace blockmm::partition {
namespace {

// One operand with labels for indices: this rank's share of the file's records, relabelled, in
// memory. Everything else (path, format, where a duplicate is) is the file's.
class RelabelledInput final : public io::InputFile {
 public:
  RelabelledInput(io::InputFile& file, std::shared_ptr<const std::vector<std::int32_t>> labels, io::RecordRange share,
                  InputRecords records)
      : file_(file), labels_(std::move(labels)), share_(share), records_(std::move(records)) {
    header_ = file.header();
    header_.n = static_cast<std::int32_t>(labels_->size()) * header_.m;
    records_.shape = header_.shape();
  }
  const std::string& path() const override { return file_.path(); }
  const FileHeader& header() const override { return header_; }
  std::string format_name() const override { return file_.format_name(); }
  InputRecords read_records(io::RecordRange range) override {
    InputRecords out;
    out.shape = header_.shape();
    out.bytes.resize(static_cast<std::size_t>(range.count * records_.stride()));
    read_records_into(range, out.bytes.data());
    return out;
  }
  void read_records_into(io::RecordRange range, std::byte* dest) override {
    // distribute() reads exactly this rank's share (one rank: all of it, maybe piece by piece).
    if (range.count < 0 || range.first < share_.first || range.first + range.count > share_.first + share_.count)
      throw Error(ExitCode::other, "internal error: records [" + std::to_string(range.first) + ", " +
                                       std::to_string(range.first + range.count) + ") of " + file_.path() +
                                       " asked of the relabelled share [" + std::to_string(share_.first) + ", " +
                                       std::to_string(share_.first + share_.count) + ")");
    if (range.count > 0)
      std::memcpy(dest, records_.record(range.first - share_.first), static_cast<std::size_t>(range.count * records_.stride()));
  }
  bool concurrent_reads() const override { return true; }
  std::pair<std::int32_t, std::int32_t> file_block(std::int32_t i, std::int32_t j) const override {
    return {(*labels_)[i], (*labels_)[j]};
  }
  std::string locate_duplicate(std::int32_t i, std::int32_t j) const override {
    const auto [fi, fj] = file_block(i, j);
    return file_.locate_duplicate(fi, fj);
  }

 private:
  io::InputFile& file_;
  std::shared_ptr<const std::vector<std::int32_t>> labels_;
  io::RecordRange share_;
  InputRecords records_;
  FileHeader header_;
};

void add_indices(const InputRecords& records, std::vector<std::int32_t>& out) {
  for (std::int64_t q = 0; q < records.size(); ++q) {
    out.push_back(record_row(records.record(q)));
    out.push_back(record_col(records.record(q)));
  }
}

void sort_unique(std::vector<std::int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

void relabel_records(const std::vector<std::int32_t>& labels, InputRecords& records) {
  const auto label = [&labels](std::int32_t index) {
    return static_cast<std::int32_t>(std::lower_bound(labels.begin(), labels.end(), index) - labels.begin());
  };
  for (std::int64_t q = 0; q < records.size(); ++q) {
    std::byte* record = records.record(q);
    set_record_index(record, label(record_row(record)), label(record_col(record)));
  }
}

}  // namespace

bool should_relabel(RelabelMode mode, std::int64_t p, std::int64_t a_records, std::int64_t b_records) {
  if (a_records == 0 || b_records == 0) return false;  // the empty product builds nothing
  if (mode != RelabelMode::automatic) return mode == RelabelMode::on;
  return p >= kRelabelMinRows && p > kRelabelRowsPerRecord * (a_records + b_records);
}

Relabelling relabel(io::InputFile& a_file, io::InputFile& b_file, const comm::Communicator& comm) {
  const io::RecordRange a_share = io::record_share(a_file.header().k, comm.rank(), comm.size());
  const io::RecordRange b_share = io::record_share(b_file.header().k, comm.rank(), comm.size());
  InputRecords a_records = a_file.read_records(a_share);
  InputRecords b_records = b_file.read_records(b_share);

  std::vector<std::int32_t> mine;
  mine.reserve(static_cast<std::size_t>(2 * (a_records.size() + b_records.size())));
  add_indices(a_records, mine);
  add_indices(b_records, mine);
  sort_unique(mine);
  auto labels = std::make_shared<std::vector<std::int32_t>>();
  if (comm.size() == 1) {
    *labels = std::move(mine);
  } else {
    // Every rank sends its distinct indices to every rank: ranks * 4 bytes an index at most.
    const int ranks = comm.size();
    const std::int64_t bytes = static_cast<std::int64_t>(mine.size() * sizeof(std::int32_t));
    std::vector<std::byte> send(static_cast<std::size_t>(bytes * ranks));
    for (int r = 0; r < ranks && bytes > 0; ++r) std::memcpy(send.data() + r * bytes, mine.data(), static_cast<std::size_t>(bytes));
    std::vector<std::int64_t> recv_bytes;
    const LargeVector<std::byte> received =
        comm.exchange(send.data(), std::vector<std::int64_t>(static_cast<std::size_t>(ranks), bytes), recv_bytes);
    labels->resize(received.size() / sizeof(std::int32_t));
    if (!labels->empty()) std::memcpy(labels->data(), received.data(), labels->size() * sizeof(std::int32_t));
    sort_unique(*labels);
  }
  relabel_records(*labels, a_records);
  relabel_records(*labels, b_records);
  Relabelling out;
  out.labels = labels;
  out.a = std::make_unique<RelabelledInput>(a_file, labels, a_share, std::move(a_records));
  out.b = std::make_unique<RelabelledInput>(b_file, labels, b_share, std::move(b_records));
  return out;
}

std::pair<std::int32_t, std::int32_t> file_rows(const std::vector<std::int32_t>& labels, std::int32_t p,
                                                std::int32_t row_begin, std::int32_t row_end) {
  const auto bound = [&](std::int32_t x) {
    if (x == 0) return std::int32_t{0};
    if (x == static_cast<std::int32_t>(labels.size())) return p;
    return labels[static_cast<std::size_t>(x)];
  };
  return {bound(row_begin), bound(row_end)};
}

}  // namespace blockmm::partition
