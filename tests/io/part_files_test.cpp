// io/part_files' choice of parts: --parts auto writes one file where the output goes into huge
// folios (one file's page cache then keeps pace, bench/NOTES.md item 41) and parts on a tmpfs of
// 4 KiB pages, a part for each 256 MiB of a rank's output, at most its copying threads, only from
// 1 GiB and where the rank prepares pages ahead; a count is split over the ranks; off is off.
#include <gtest/gtest.h>

#include <cstdint>

#include "io/mapped_writer.hpp"
#include "io/part_files.hpp"

namespace blockmm::io {
namespace {

OutputPolicy policy_of(const char* parts, int rank_threads) {
  return output_policy(write_policy(0, true, false, false, rank_threads), rank_threads, parts);
}

TEST(PartsForRank, AutoIsOneFileWhereTheOutputGoesIntoHugeFolios) {
  const std::int64_t gib = std::int64_t{1} << 30;
  const OutputPolicy automatic = policy_of("auto", 16);
  // 4.8 GB on one rank of 16 threads: one file in huge folios, else eight parts (its copying threads).
  EXPECT_EQ(parts_for_rank(automatic, 1, 4 * gib + gib / 2, true, true, 1000000, 4 * gib + gib / 2), 0);
  EXPECT_EQ(parts_for_rank(automatic, 1, 4 * gib + gib / 2, true, false, 1000000, 4 * gib + gib / 2), 8);
  EXPECT_EQ(parts_for_rank(automatic, 1, gib + 1, true, false, 1000000, gib + 1), 5);  // a part a 256 MiB
  // Not on tmpfs, under 1 GiB, or a rank without threads to spare: one file.
  EXPECT_EQ(parts_for_rank(automatic, 1, 4 * gib, false, false, 1000000, 4 * gib), 0);
  EXPECT_EQ(parts_for_rank(automatic, 1, gib - 1, true, false, 1000000, gib - 1), 0);
  EXPECT_EQ(parts_for_rank(policy_of("auto", 2), 1, 4 * gib, true, false, 1000000, 4 * gib), 0);
}

TEST(PartsForRank, ACountIsSplitOverTheRanksAndOffIsOneFile) {
  const OutputPolicy eight = policy_of("8", 16);
  EXPECT_EQ(parts_for_rank(eight, 1, 100, true, true, 1000, 100), 8) << "a count asked for is written, huge folios or not";
  EXPECT_EQ(parts_for_rank(eight, 3, 100, false, false, 1000, 100), 3);
  EXPECT_EQ(parts_for_rank(eight, 1, 100, true, false, 5, 100), 5) << "never more parts than tiles";
  EXPECT_EQ(parts_for_rank(eight, 1, 100, true, false, 0, 0), 0);
  EXPECT_EQ(parts_for_rank(policy_of("off", 16), 1, std::int64_t{1} << 40, true, false, 1000000, std::int64_t{1} << 40), 0);
}

}  // namespace
}  // namespace blockmm::io
