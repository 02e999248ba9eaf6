#include "multiply/shared_rows.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/placing_sink.hpp"

namespace blockmm::multiply {
namespace {

// Node counters: rank r's head region is counter 2r, its tail 2r + 1.
int head_counter(int rank) { return 2 * rank; }
int tail_counter(int rank) { return 2 * rank + 1; }

}  // namespace

partition::RowSharing row_sharing(RowSharingMode mode, int ranks, std::int32_t m, int threads_per_rank) {
  constexpr double kFraction = 0.125;  // of a panel's work at each end (see the header)
  if (ranks < 2 || m < 4 || mode == RowSharingMode::off) return {};
  // Asked for by name: shared whatever the work.
  if (mode != RowSharingMode::automatic) return {kFraction, 0};
  const std::int64_t macs_per_product = std::int64_t{m} * m * m;
  const std::int64_t min_macs = (std::int64_t{1} << 28) * std::max(1, threads_per_rank);
  return {kFraction, (min_macs + macs_per_product - 1) / macs_per_product};
}

SharedNumericResult shared_numeric(kernels::Backend& backend, const kernels::Operand& a, const kernels::Operand& b,
                                   const kernels::ProductPattern& pattern, SharedNumericPlan& plan, RecordSink& sink,
                                   const kernels::NumericOptions& options, const comm::Communicator& comm) {
  const partition::SharedRegions& regions = *plan.regions;
  const int r = comm.rank();
  const int ranks = comm.size();
  const std::vector<std::int64_t>& row_ptr = pattern.layout().row_ptr;
  const std::int64_t own_tiles = pattern.tiles();
  const std::int64_t head_tiles = row_ptr[static_cast<std::size_t>(regions.head_end[r] - plan.row_begin)];
  const std::int64_t tail_first = row_ptr[static_cast<std::size_t>(regions.tail_begin[r] - plan.row_begin)];
  const std::vector<std::int64_t> heads = comm.gather_all(head_tiles);
  const std::vector<std::int64_t> tails = comm.gather_all(own_tiles - tail_first);
  const std::int64_t below_tiles = plan.below.pattern ? plan.below.pattern->tiles() : 0;
  const std::int64_t above_tiles = plan.above.pattern ? plan.above.pattern->tiles() : 0;
  comm.run_phase([&] {
    const bool agree = (r == 0 || below_tiles == tails[static_cast<std::size_t>(r - 1)]) &&
                       (r + 1 == ranks || above_tiles == heads[static_cast<std::size_t>(r + 1)]);
    if (!agree)
      throw Error(ExitCode::other, "internal error: rank " + std::to_string(r) +
                                       "'s symbolic phase of its neighbours' shared rows disagrees with theirs");
  });

  // Granules as the owner and the helper both cut them: from the region's tiles and the chunk limit.
  const std::int64_t stride = record_bytes<std::uint32_t>(plan.m);
  const std::int64_t limit = std::max<std::int64_t>(1, options.chunk_bytes / stride);
  std::unique_ptr<comm::NodeCounters> counters = comm.node_counters(2 * ranks);
  comm::NodeCounters& node = *counters;
  const auto claim = [&node](int counter) { return [&node, counter] { return node.fetch_add(counter); }; };

  partition::TileClaims own, below, above;
  own.add_own(head_tiles, tail_first);
  own.add_shared(tail_first, own_tiles, partition::granule_tiles(own_tiles - tail_first, limit), claim(tail_counter(r)));
  own.add_shared(0, head_tiles, partition::granule_tiles(head_tiles, limit), claim(head_counter(r)));
  if (r > 0) below.add_shared(0, below_tiles, partition::granule_tiles(below_tiles, limit), claim(tail_counter(r - 1)));
  if (r + 1 < ranks)
    above.add_shared(0, above_tiles, partition::granule_tiles(above_tiles, limit), claim(head_counter(r + 1)));

  SharedNumericResult result;
  std::exception_ptr failure;
  try {
    const auto run = [&](const kernels::Operand& rows, const kernels::ProductPattern& tiles, partition::TileClaims& claims,
                         RecordSink& to) {
      kernels::NumericOptions mine = options;
      mine.next_tiles = [&claims](std::int64_t& begin, std::int64_t& end) { return claims.next(begin, end); };
      result.report.add(backend.numeric(rows, b, tiles, to, mine));
    };
    // A neighbour's tiles go to the writer numbered from this panel's first tile.
    PlacingSink below_sink(sink, -below_tiles);
    PlacingSink above_sink(sink, own_tiles);
    const auto help = [&] {
      if (plan.above.a) run(*plan.above.a, *plan.above.pattern, above, above_sink);
      if (plan.below.a) run(*plan.below.a, *plan.below.pattern, below, below_sink);
    };
    if (plan.give_first) help();
    run(a, pattern, own, sink);
    if (!plan.give_first) help();
    result.tiles_for_neighbours = above.tiles_claimed() + below.tiles_claimed();
  } catch (...) {
    failure = std::current_exception();
  }
  counters.reset();  // collective: every rank is past its claims
  comm.agree(failure);
  return result;
}

}  // namespace blockmm::multiply
