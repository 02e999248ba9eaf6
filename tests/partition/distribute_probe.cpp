// partition::distribute() under a real mpiexec, for tests/partition/distribute_test.cpp:
//
//   distribute_probe A B [share-only]
//
// Every rank distributes A and B (binary or HDF5), takes its operands and checks them against
// the one-rank view computed here from the whole files: its A records are exactly the files'
// records whose block-row lies in its range, its B records exactly those of the block-rows its
// A records reference (compared as sorted multisets of whole records), and every rank agrees on
// the ranges. It prints "rank R: ok a A b B rows LO HI records-within X records-between Y
// index-within Z index-between W" (its ExchangeCounters), or "rank R: exit C: MESSAGE" when the
// distribution threw (a duplicate), or "rank R: FAIL: WHAT". With "share-only" each file is
// seen through an object that serves only this rank's share and is not readable_by_every_rank()
// (as a relabelled share in memory is): records must then travel as bytes, also within a node.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "partition/distribute.hpp"

namespace {

using blockmm::InputRecords;

// The records as a sorted list of whole records (order does not matter to an operand).
std::vector<std::string> as_sorted(const InputRecords& records) {
  std::vector<std::string> out;
  for (std::int64_t q = 0; q < records.size(); ++q)
    out.emplace_back(reinterpret_cast<const char*>(records.record(q)), static_cast<std::size_t>(records.stride()));
  std::sort(out.begin(), out.end());
  return out;
}

InputRecords whole_file(blockmm::io::InputFile& file) { return file.read_records({0, file.header().k}); }

// Only this rank's share of `file`, refusing any other record (as partition/relabel's
// relabelled shares do).
class ShareOnly final : public blockmm::io::InputFile {
 public:
  ShareOnly(blockmm::io::InputFile& file, blockmm::io::RecordRange share) : file_(file), share_(share) {}
  const std::string& path() const override { return file_.path(); }
  const blockmm::FileHeader& header() const override { return file_.header(); }
  std::string format_name() const override { return file_.format_name(); }
  InputRecords read_records(blockmm::io::RecordRange range) override {
    check(range);
    return file_.read_records(range);
  }
  void read_records_into(blockmm::io::RecordRange range, std::byte* dest) override {
    check(range);
    file_.read_records_into(range, dest);
  }
  std::string locate_duplicate(std::int32_t i, std::int32_t j) const override { return file_.locate_duplicate(i, j); }

 private:
  void check(blockmm::io::RecordRange range) const {
    if (range.first < share_.first || range.first + range.count > share_.first + share_.count)
      throw blockmm::Error(blockmm::ExitCode::other, "records outside the share asked of a share-only file");
  }
  blockmm::io::InputFile& file_;
  blockmm::io::RecordRange share_;
};

InputRecords rows_of(const InputRecords& all, const std::vector<char>& wanted) {
  InputRecords out;
  out.shape = all.shape;
  for (std::int64_t q = 0; q < all.size(); ++q)
    if (wanted[static_cast<std::size_t>(blockmm::record_row(all.record(q)))])
      out.bytes.insert(out.bytes.end(), all.record(q), all.record(q) + all.stride());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const blockmm::settings::Lookup environment = blockmm::settings::process_environment();
  blockmm::comm::CommunicatorOptions options = blockmm::comm::communicator_options(
      blockmm::settings::Settings::read(environment), blockmm::comm::launcher_placement(environment));
  options.mode = blockmm::comm::MpiMode::on;
  blockmm::comm::Communicator comm(options, &argc, &argv);
  const int rank = comm.rank();
  const bool share_only = argc == 4 && std::strcmp(argv[3], "share-only") == 0;
  if (argc != 3 && !share_only) {
    std::fprintf(stderr, "usage: distribute_probe A B [share-only]\n");
    return 64;
  }
  std::string failure;
  try {
    std::unique_ptr<blockmm::io::InputFile> a_file, b_file;
    comm.run_phase([&] {
      a_file = blockmm::io::open_input(argv[1], comm);
      b_file = blockmm::io::open_input(argv[2], comm);
    });
    std::unique_ptr<blockmm::io::InputFile> a_share, b_share;
    if (share_only) {
      a_share = std::make_unique<ShareOnly>(*a_file, blockmm::io::record_share(a_file->header().k, rank, comm.size()));
      b_share = std::make_unique<ShareOnly>(*b_file, blockmm::io::record_share(b_file->header().k, rank, comm.size()));
    }
    blockmm::partition::Distribution d = blockmm::partition::distribute(share_only ? *a_share : *a_file,
                                                                        share_only ? *b_share : *b_file, comm);
    const InputRecords a_got = d.a->take();
    const InputRecords b_got = d.b->take();

    // The one-rank view, from the whole files.
    const std::int32_t p = a_file->header().shape().block_rows();
    const std::int32_t lo = d.bounds.at(static_cast<std::size_t>(rank)), hi = d.bounds.at(static_cast<std::size_t>(rank) + 1);
    const std::vector<std::int64_t> los = comm.gather_all(std::int64_t{lo}), his = comm.gather_all(std::int64_t{hi});
    if (d.bounds.front() != 0 || d.bounds.back() != p) failure = "bounds do not cover the block-rows";
    for (int r = 0; r < comm.size(); ++r)
      if (los[r] != d.bounds[r] || his[r] != d.bounds[r + 1]) failure = "ranks disagree on the bounds";
    std::vector<char> mine(static_cast<std::size_t>(p), 0);
    for (std::int32_t i = lo; i < hi; ++i) mine[static_cast<std::size_t>(i)] = 1;
    const InputRecords a_want = rows_of(whole_file(*a_file), mine);
    std::vector<char> needed(static_cast<std::size_t>(p), 0);
    for (std::int64_t q = 0; q < a_want.size(); ++q) needed[static_cast<std::size_t>(blockmm::record_col(a_want.record(q)))] = 1;
    const InputRecords b_want = rows_of(whole_file(*b_file), needed);
    if (d.a_spec.row_begin != lo || d.a_spec.row_end != hi) failure = "the A spec's rows are not the rank's range";
    if (as_sorted(a_got) != as_sorted(a_want)) failure = "A records differ from the one-rank view";
    if (as_sorted(b_got) != as_sorted(b_want)) failure = "B records differ from the one-rank view";
    if (failure.empty()) {
      const blockmm::partition::ExchangeCounters& c = d.exchanged;
      std::printf("rank %d: ok a %lld b %lld rows %d %d records-within %lld records-between %lld index-within %lld "
                  "index-between %lld\n",
                  rank, static_cast<long long>(a_got.size()), static_cast<long long>(b_got.size()), lo, hi,
                  static_cast<long long>(c.record_bytes_within_node), static_cast<long long>(c.record_bytes_between_nodes),
                  static_cast<long long>(c.index_bytes_within_node), static_cast<long long>(c.index_bytes_between_nodes));
    } else {
      std::printf("rank %d: FAIL: %s\n", rank, failure.c_str());
    }
  } catch (const blockmm::Error& e) {
    std::printf("rank %d: exit %d: %s\n", rank, static_cast<int>(e.code()), e.what());
    std::fflush(stdout);
    return static_cast<int>(e.code());
  }
  std::fflush(stdout);
  return failure.empty() ? 0 : 1;
}
