// The numeric phase of a rank that shares rows with its neighbours on one node
// (partition/row_sharing.hpp): its panel's core first, then granules of its own head and tail
// and of the neighbours' regions beside them, claimed through node-shared counters, each written
// at its place in the file by whoever computed it. The driver decides whether rows are shared;
// this runs the claims.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"
#include "core/record_sink.hpp"
#include "kernels/backend.hpp"
#include "multiply/options.hpp"
#include "partition/row_sharing.hpp"

namespace blockmm::multiply {

// How much of each panel's work is shared at either end, and from how much work on: about an
// eighth, which absorbs ranks up to about 1.25x apart in speed. Its cost is the neighbours'
// regions built and their symbolic phase run twice, which repays only where block products are
// the work (m >= 4), and collectives, node-shared counters and three numeric calls, which repay
// only where a rank computes long enough for an imbalance to cost more: from 2^28 multiply-adds
// a thread (both thresholds from the bench machines' measured runs with sharing on and off). No
// sharing for one rank, m < 4, or mode off; on and give_first share whatever the work
// (give_first: each rank claims its neighbours' regions before its own panel, so that tests
// cover a neighbour computing most shared tiles).
partition::RowSharing row_sharing(RowSharingMode mode, int ranks, std::int32_t m, int threads_per_rank);

// A neighbour's region that this rank may compute: its operand and pattern here.
struct NeighbourRegion {
  std::unique_ptr<kernels::Operand> a;
  std::unique_ptr<kernels::ProductPattern> pattern;
};

struct SharedNumericPlan {
  std::int32_t m = 1;
  const partition::SharedRegions* regions = nullptr;
  std::int32_t row_begin = 0;  // this rank's panel: block-rows [row_begin, row_end)
  NeighbourRegion below;       // rank - 1's tail (a null operand: none)
  NeighbourRegion above;       // rank + 1's head
  bool give_first = false;
};

struct SharedNumericResult {
  kernels::NumericReport report;
  std::int64_t tiles_for_neighbours = 0;  // tiles of the neighbours' panels computed here
};

// Collective over the ranks (all on one node). Checks first that each region's tiles agree
// between its owner and its helper (they ran the same exact symbolic phase on the same rows).
SharedNumericResult shared_numeric(kernels::Backend& backend, const kernels::Operand& a, const kernels::Operand& b,
                                   const kernels::ProductPattern& pattern, SharedNumericPlan& plan, RecordSink& sink,
                                   const kernels::NumericOptions& options, const comm::Communicator& comm);

}  // namespace blockmm::multiply
