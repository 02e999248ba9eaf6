// Rows that neighbouring ranks of one node compute for each other. Every rank keeps its panel:
// its block-rows, its output layout and its place in the file. Only the numeric phase of the
// rows at the two ends of a panel (its head and tail regions, a fraction of its work each) is
// shared: a region is cut into granules that the owner and the neighbour beside it claim from
// one counter in node-shared memory, and whoever computes a granule writes it at its place in
// the file. A rank whose cores run slower (a VM's unequal vCPUs, a laptop's efficiency cores, a
// noisy neighbour) is then helped instead of holding up the run, which static ranges cannot do.
// The cost is the neighbours' regions built and their symbolic phase run twice.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace blockmm::partition {

// Per rank r, with bounds[r] <= head_end[r] <= tail_begin[r] <= bounds[r+1]: rank r's head
// [bounds[r], head_end[r]) may be computed by rank r-1, its tail [tail_begin[r], bounds[r+1])
// by rank r+1. The first rank has no head and the last no tail (empty regions).
struct SharedRegions {
  std::vector<std::int32_t> head_end;
  std::vector<std::int32_t> tail_begin;
  bool empty() const { return head_end.empty(); }
};

// What a run asks of sharing: about `fraction` of each rank's work at either end of its panel,
// where the ranks' average work (block products) reaches `min_part_work`. Sharing has a fixed
// cost whatever the work (node-shared counters, collectives, the neighbours' regions built and
// their symbolic phase run twice), so it pays only where the compute is long enough for a 1.25x
// imbalance to cost more (multiply/shared_rows.hpp sets both).
struct RowSharing {
  double fraction = 0;
  std::int64_t min_part_work = 0;
};

// Regions of about `sharing.fraction` of each rank's work (its block-rows' `work`, as the bounds
// were balanced on) at either end, never crossing each other; empty (no sharing) when the
// fraction is <= 0, there is one part, or the parts' average work is below min_part_work.
SharedRegions shared_regions(const std::vector<std::int64_t>& work, const std::vector<std::int32_t>& bounds,
                             RowSharing sharing);

// Tiles a granule of a region holds: a quarter of the region (so about 1/32 of a panel's work
// at the default fraction), at most `max_tiles` (the chunk limit). Each granule is a chunk of
// the numeric phase, whose thread team meets at its end: finer granules add more of those
// meetings than their balance wins back. Owner and helper compute it from the same figures, so
// they cut alike.
std::int64_t granule_tiles(std::int64_t region_tiles, std::int64_t max_tiles);

// Claims one granule of a region: returns the number of the next unclaimed granule (they are
// handed out 0, 1, 2, ...: a counter's fetch_add), whoever asks.
using ClaimGranule = std::function<std::uint64_t()>;

// The tile ranges one rank computes of one operand pattern, in the order it takes them: the
// ranges that are its alone first, then granules of the shared ranges as it wins them, taking
// from each shared range in turn.
class TileClaims {
 public:
  void add_own(std::int64_t begin, std::int64_t end);
  void add_shared(std::int64_t begin, std::int64_t end, std::int64_t granule, ClaimGranule claim);
  // The next range to compute, false when nothing is left to this rank.
  bool next(std::int64_t& begin, std::int64_t& end);
  std::int64_t tiles_claimed() const { return tiles_claimed_; }

 private:
  struct Shared {
    std::int64_t begin;
    std::int64_t end;
    std::int64_t granule;
    ClaimGranule claim;
    bool exhausted = false;
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> own_;
  std::vector<Shared> shared_;
  std::size_t next_own_ = 0;
  std::size_t turn_ = 0;
  std::int64_t tiles_claimed_ = 0;
};

}  // namespace blockmm::partition
