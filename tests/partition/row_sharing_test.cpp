// partition/row_sharing: the regions at the ends of each panel, the granules, and claims that
// hand every tile out exactly once however many claimers race for them.
#include "partition/row_sharing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "partition/work.hpp"

namespace blockmm::partition {
namespace {

std::int64_t work_of(const std::vector<std::int64_t>& work, std::int32_t begin, std::int32_t end) {
  return std::accumulate(work.begin() + begin, work.begin() + end, std::int64_t{0});
}

TEST(SharedRegions, EachPanelSharesAboutTheFractionAtItsInnerEnds) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int rows = 1 + static_cast<int>(rng() % 400);
    const int parts = 2 + static_cast<int>(rng() % 6);
    std::vector<std::int64_t> work(static_cast<std::size_t>(rows));
    for (auto& w : work) w = rng() % 4 == 0 ? 0 : static_cast<std::int64_t>(rng() % 1000);
    const std::vector<std::int32_t> bounds = balanced_ranges(work, parts);
    const SharedRegions regions = shared_regions(work, bounds, {0.125, 0});
    ASSERT_EQ(regions.head_end.size(), static_cast<std::size_t>(parts));
    for (int r = 0; r < parts; ++r) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " part " + std::to_string(r));
      const std::int32_t lo = bounds[r], hi = bounds[r + 1];
      ASSERT_LE(lo, regions.head_end[r]);
      ASSERT_LE(regions.head_end[r], regions.tail_begin[r]);
      ASSERT_LE(regions.tail_begin[r], hi);
      if (r == 0) {
        EXPECT_EQ(regions.head_end[r], lo) << "the first panel has no head";
      }
      if (r + 1 == parts) {
        EXPECT_EQ(regions.tail_begin[r], hi) << "the last panel has no tail";
      }
      // Whole rows until the share is reached: without the region's last row it was short.
      const std::int64_t share = static_cast<std::int64_t>(static_cast<double>(work_of(work, lo, hi)) * 0.125);
      if (regions.head_end[r] > lo + 1) {
        EXPECT_LT(work_of(work, lo, regions.head_end[r] - 1), share);
      }
      if (regions.tail_begin[r] < hi - 1 && regions.tail_begin[r] > regions.head_end[r]) {
        EXPECT_LT(work_of(work, regions.tail_begin[r] + 1, hi), share);
      }
      if (r > 0 && hi - lo >= 2) {
        EXPECT_GT(regions.head_end[r], lo) << "a panel of two rows or more shares one";
      }
    }
  }
}

TEST(SharedRegions, NoneForOnePartNoFractionOrTooLittleWork) {
  const std::vector<std::int64_t> work(100, 3);
  EXPECT_TRUE(shared_regions(work, {0, 100}, {0.125, 0}).empty());
  EXPECT_TRUE(shared_regions(work, {0, 50, 100}, {0, 0}).empty());
  EXPECT_FALSE(shared_regions(work, {0, 50, 100}, {0.125, 0}).empty());
  // 300 block products over two parts: 150 each on average, shared from 150 on, not from 151.
  EXPECT_FALSE(shared_regions(work, {0, 50, 100}, {0.125, 150}).empty());
  EXPECT_TRUE(shared_regions(work, {0, 50, 100}, {0.125, 151}).empty());
  EXPECT_TRUE(shared_regions(work, {0, 10, 100}, {0.125, 151}).empty());  // unequal parts: the average
  // Empty panels (more parts than rows) share nothing and stay in order.
  const SharedRegions tiny = shared_regions({5}, {0, 0, 1, 1}, {0.125, 0});
  for (int r = 0; r < 3; ++r) EXPECT_LE(tiny.head_end[r], tiny.tail_begin[r]);
}

TEST(Granules, AQuarterAndNeverAboveTheChunk) {
  EXPECT_EQ(granule_tiles(0, 100), 1);
  EXPECT_EQ(granule_tiles(1, 100), 1);
  EXPECT_EQ(granule_tiles(40, 100), 10);
  EXPECT_EQ(granule_tiles(41, 100), 11);
  EXPECT_EQ(granule_tiles(1 << 20, 100), 100);
  EXPECT_EQ(granule_tiles(1 << 20, 0), 1);
}

// Claimers on threads share the counters of two regions; each also has a range of its own.
// Every tile is computed exactly once, own ranges come first, and ranges never leave their region.
TEST(TileClaims, EveryTileOnceWhateverTheRace) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<std::uint64_t> head{0}, tail{0};
    const std::int64_t tiles = 1000 + round * 37;
    const std::int64_t head_end = 130 + round, tail_begin = 870;
    const int claimers = 4;
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> got(claimers);
    std::vector<std::thread> threads;
    for (int c = 0; c < claimers; ++c)
      threads.emplace_back([&, c] {
        TileClaims claims;
        if (c == 0) claims.add_own(head_end, tail_begin);  // the owner's core
        claims.add_shared(tail_begin, tiles, granule_tiles(tiles - tail_begin, 7), [&] { return tail.fetch_add(1); });
        claims.add_shared(0, head_end, granule_tiles(head_end, 1000), [&] { return head.fetch_add(1); });
        std::int64_t begin = 0, end = 0, claimed = 0;
        while (claims.next(begin, end)) {
          got[c].emplace_back(begin, end);
          claimed += end - begin;
        }
        EXPECT_EQ(claims.tiles_claimed(), claimed);
      });
    for (std::thread& t : threads) t.join();
    std::vector<int> times(static_cast<std::size_t>(tiles), 0);
    for (int c = 0; c < claimers; ++c)
      for (const auto& [begin, end] : got[c]) {
        ASSERT_LT(begin, end);
        const bool in_head = end <= head_end, in_core = begin >= head_end && end <= tail_begin,
                   in_tail = begin >= tail_begin && end <= tiles;
        ASSERT_TRUE(in_head || in_core || in_tail) << "[" << begin << ", " << end << ") crosses a region";
        for (std::int64_t t = begin; t < end; ++t) ++times[static_cast<std::size_t>(t)];
      }
    for (std::int64_t t = 0; t < tiles; ++t) ASSERT_EQ(times[static_cast<std::size_t>(t)], 1) << "tile " << t;
    ASSERT_FALSE(got[0].empty());
    EXPECT_EQ(got[0].front(), std::make_pair(head_end, tail_begin)) << "the own range comes first";
  }
}

}  // namespace
}  // namespace blockmm::partition
