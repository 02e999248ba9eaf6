#include "partition/row_sharing.hpp"

#include <algorithm>
#include <utility>

namespace blockmm::partition {

SharedRegions shared_regions(const std::vector<std::int64_t>& work, const std::vector<std::int32_t>& bounds,
                             RowSharing sharing) {
  SharedRegions regions;
  const int parts = static_cast<int>(bounds.size()) - 1;
  if (parts < 2 || !(sharing.fraction > 0)) return regions;
  std::int64_t all_work = 0;
  for (const std::int64_t w : work) all_work += w;
  if (all_work / parts < sharing.min_part_work) return regions;
  const double fraction = std::min(sharing.fraction, 0.5);
  regions.head_end.resize(static_cast<std::size_t>(parts));
  regions.tail_begin.resize(static_cast<std::size_t>(parts));
  for (int r = 0; r < parts; ++r) {
    const std::int32_t lo = bounds[r], hi = bounds[r + 1];
    std::int64_t total = 0;
    for (std::int32_t i = lo; i < hi; ++i) total += work[static_cast<std::size_t>(i)];
    const auto share = static_cast<std::int64_t>(static_cast<double>(total) * fraction);
    // Whole rows from each end until the region holds its share (at least one row when the
    // panel has work and two rows or more, so that a small panel still shares something).
    std::int32_t head = lo;
    if (r > 0)
      for (std::int64_t sum = 0; head < hi && (sum < share || head == lo) && hi - lo >= 2;)
        sum += work[static_cast<std::size_t>(head++)];
    std::int32_t tail = hi;
    if (r + 1 < parts)
      for (std::int64_t sum = 0; tail > head && (sum < share || tail == hi) && hi - lo >= 2;)
        sum += work[static_cast<std::size_t>(--tail)];
    regions.head_end[r] = head;
    regions.tail_begin[r] = std::max(head, tail);
  }
  return regions;
}

std::int64_t granule_tiles(std::int64_t region_tiles, std::int64_t max_tiles) {
  return std::max<std::int64_t>(1, std::min((region_tiles + 3) / 4, max_tiles));
}

void TileClaims::add_own(std::int64_t begin, std::int64_t end) {
  if (begin < end) own_.emplace_back(begin, end);
}

void TileClaims::add_shared(std::int64_t begin, std::int64_t end, std::int64_t granule, ClaimGranule claim) {
  if (begin < end) shared_.push_back({begin, end, std::max<std::int64_t>(1, granule), std::move(claim)});
}

bool TileClaims::next(std::int64_t& begin, std::int64_t& end) {
  if (next_own_ < own_.size()) {
    std::tie(begin, end) = own_[next_own_++];
    tiles_claimed_ += end - begin;
    return true;
  }
  for (std::size_t tried = 0; tried < shared_.size(); ++tried) {
    Shared& s = shared_[turn_++ % shared_.size()];
    if (s.exhausted) continue;
    const std::uint64_t g = s.claim();
    const std::uint64_t granules = static_cast<std::uint64_t>((s.end - s.begin + s.granule - 1) / s.granule);
    if (g >= granules) {
      s.exhausted = true;
      continue;
    }
    begin = s.begin + static_cast<std::int64_t>(g) * s.granule;
    end = std::min(s.end, begin + s.granule);
    tiles_claimed_ += end - begin;
    return true;
  }
  return false;
}

}  // namespace blockmm::partition
