// The layout a rank takes over its backends for its operands (multiply/plan.hpp, plan_layout),
// as a GPU's room decides it: rows split where A, B and the numeric chunks fit a backend; B in
// column panels (streamed past one round) where B does not; A in host memory where A itself does
// not fit beside the numeric chunks; a clear error where the chunks alone do not. Sizes as the
// cuda backend reports them (kernels/cuda/device_ledger.hpp), so that the issue-52 case's plan is
// checked as it runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "kernels/cuda/device_ledger.hpp"
#include "multiply/plan.hpp"

namespace blockmm::multiply {
namespace {

constexpr std::int64_t MiB = std::int64_t{1} << 20;

LayoutPlan plan_team(int backends, std::int64_t a, std::int64_t b, std::int64_t room, std::int64_t numeric, int asked,
                     std::int64_t pattern = 0) {
  LayoutFacts facts;
  facts.pattern_bytes = pattern;
  facts.backends = backends;
  facts.a_bytes = a;
  facts.b_bytes = b;
  facts.room = room;
  facts.numeric_bytes = numeric;
  facts.panels_asked = asked;
  return plan_layout(facts);
}

TEST(LayoutPlan, RowsSplitWhereEverythingFits) {
  const LayoutPlan plan = plan_team(2, 100 * MiB, 200 * MiB, 400 * MiB, 20 * MiB, 0);
  EXPECT_FALSE(plan.split_columns);
  EXPECT_FALSE(plan.a_in_host_memory);
  EXPECT_FALSE(plan_team(1, 100 * MiB, 200 * MiB, 0, 20 * MiB, 0).split_columns);  // no bound known
}

TEST(LayoutPlan, BInPanelsStreamedWhereItDoesNotFitBesideA) {
  const LayoutPlan plan = plan_team(1, 100 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_FALSE(plan.a_in_host_memory);
  // 80 MiB left, panels of four fifths of it: 200 / 64 -> 4 panels, one held at a time.
  EXPECT_EQ(plan.panels, 4);
  EXPECT_EQ(plan.max_panel_bytes, 64 * MiB);
  // Two backends: whole rounds of panels, one each a round.
  EXPECT_EQ(plan_team(2, 100 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0).panels, 4);
  EXPECT_EQ(plan_team(3, 100 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0).panels, 6);
}

TEST(LayoutPlan, AInHostMemoryWhereItDoesNotFitBesideTheNumericChunks) {
  const LayoutPlan plan = plan_team(1, 300 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_TRUE(plan.a_in_host_memory);
  // The room less the chunks is the panels': 180 MiB, panels of 144: 2 panels.
  EXPECT_EQ(plan.panels, 2);
  // Exactly full with A on the device is still A in host memory (nothing left for B).
  EXPECT_TRUE(plan_team(1, 180 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0).a_in_host_memory);
  EXPECT_FALSE(plan_team(1, 179 * MiB, 200 * MiB, 200 * MiB, 20 * MiB, 0).a_in_host_memory);
}

TEST(LayoutPlan, ARoomBelowTheNumericChunksIsAClearError) {
  try {
    (void)plan_team(1, 10 * MiB, 10 * MiB, 16 * MiB, 17 * MiB, 0);
    FAIL() << "expected an OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--mem-budget"), std::string::npos) << message;
    EXPECT_NE(message.find("17 MiB"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(LayoutPlan, PanelsAskedForAreStreamedWhateverTheSizes) {
  const LayoutPlan plan = plan_team(2, 300 * MiB, 200 * MiB, 10 * MiB, 20 * MiB, 5);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_EQ(plan.panels, 5);
  EXPECT_FALSE(plan.a_in_host_memory);
}

// Random sizes: every plan's panels hold B within what the room leaves, and A is kept in host
// memory exactly where it does not fit beside the numeric chunks.
TEST(LayoutPlan, PanelsFitTheRoomOnRandomSizes) {
  std::mt19937_64 rng(52);
  for (int c = 0; c < 2000; ++c) {
    const auto draw = [&](std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(1, hi)(rng); };
    const int backends = static_cast<int>(draw(4));
    const std::int64_t a = draw(1000) * MiB, b = draw(1000) * MiB, room = draw(1000) * MiB, numeric = draw(50) * MiB;
    const std::int64_t pattern = draw(2) == 1 ? 0 : draw(400) * MiB, beside = numeric + pattern / backends;
    const std::string what = "case " + std::to_string(c);
    if (room <= beside && a + b + beside > room) {
      EXPECT_THROW((void)plan_team(backends, a, b, room, numeric, 0, pattern), ResourceError) << what;
      continue;
    }
    const LayoutPlan plan = plan_team(backends, a, b, room, numeric, 0, pattern);
    if (!plan.split_columns) {
      EXPECT_LE(a + b + beside, room) << what;
      continue;
    }
    EXPECT_EQ(plan.a_in_host_memory, a + beside >= room) << what;
    const std::int64_t left = room - beside - (plan.a_in_host_memory ? 0 : a);
    ASSERT_GT(left, 0) << what;
    EXPECT_EQ(plan.panels % backends, 0) << what;
    EXPECT_LE((b + plan.panels - 1) / plan.panels, left) << what;  // an even panel fits what is left
  }
}

// Issue 52: n 4 096, m 8, 200 000 blocks each (27.2 MB files) under --mem-budget 64M on one GPU.
// Planned with the device build's peak as A's size (128 MiB) it was refused; with what A holds
// once built it runs with A on the device and B in panels, and at 40M with A in host memory.
TEST(LayoutPlan, TheIssue52CaseRunsUnderA64MiBBudget) {
  using namespace kernels::cuda;
  const std::int64_t a = operand_device_bytes(200000, 8, 512, 512, false);
  const std::int64_t b = operand_device_bytes(200000, 8, 512, 512, true);
  const std::int64_t numeric = numeric_minimum_bytes(8) + pattern_device_bytes(kernels::estimated_tiles(200000, 200000, 512, 512), 512);
  const std::int64_t room = 64 * MiB - kUncountedReserve;
  // (The device build's peak does not fit beside the chunks: the plan of main before the fix
  // refused the run there; now it would keep A in host memory.)
  EXPECT_TRUE(plan_team(1, device_build_peak_bytes(200000, 8, 512, 512, false), b, room, numeric, 0).a_in_host_memory);
  const LayoutPlan plan = plan_team(1, a, b, room, numeric, 0);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_FALSE(plan.a_in_host_memory);
  EXPECT_GE(plan.panels, 2);
  const LayoutPlan small = plan_team(1, a, b, 40 * MiB - kUncountedReserve, numeric, 0);
  EXPECT_TRUE(small.split_columns);
  EXPECT_TRUE(small.a_in_host_memory);
  // Where it all fits (96M), one backend keeps the plain layout.
  EXPECT_FALSE(plan_team(1, a, b, 96 * MiB - kUncountedReserve, numeric, 0).split_columns);
}

// tests/e2e/gpu/multi_gpu.sh's budget below B: n 65 536, m 8, A 134 217 blocks, B 6 710 886
// (912 680 508 bytes), --mem-budget half of B's file. Each backend keeps every panel's pattern
// until the numeric phase (55 M tiles, 211 MiB, measured by the ledger on an H200): planned
// without them, B's panels filled the room and the numeric phase found none left ("holds 489 MiB
// ... as much as the budget of 435 MiB"). With the estimate, a panel, A, the whole pattern and
// the chunks fit.
TEST(LayoutPlan, PanelsLeaveRoomForTheProductsPattern) {
  using namespace kernels::cuda;
  const std::int64_t a = operand_device_bytes(134217, 8, 8192, 8192, false);
  const std::int64_t b = operand_device_bytes(6710886, 8, 8192, 8192, true);
  const std::int64_t numeric = numeric_minimum_bytes(8);
  const std::int64_t room = 912680508 / 2 - kUncountedReserve;
  const std::int64_t tiles = kernels::estimated_tiles(134217, 6710886, 8192, 8192);
  EXPECT_EQ(tiles, std::int64_t{8192} * 8192);  // A's rows times B's columns: fewer than the products
  const std::int64_t measured = pattern_device_bytes(55200000, 8192);
  const LayoutPlan before = plan_team(1, a, b, room, numeric, 0);
  EXPECT_GT(a + before.max_panel_bytes + measured + numeric, room);  // the refusal the GPU suite met
  const LayoutPlan plan = plan_team(1, a, b, room, numeric, 0, pattern_device_bytes(tiles, 8192));
  EXPECT_TRUE(plan.split_columns);
  EXPECT_FALSE(plan.a_in_host_memory);
  EXPECT_LE(a + plan.max_panel_bytes + measured + numeric, room);
  EXPECT_GE(plan.panels, 5);
}

TEST(LayoutPlan, EstimatedTilesAreAtMostTheProductsAndTheDenseProduct) {
  EXPECT_EQ(kernels::estimated_tiles(0, 100, 10, 10), 0);
  EXPECT_EQ(kernels::estimated_tiles(100, 0, 10, 10), 0);
  EXPECT_EQ(kernels::estimated_tiles(10, 20, 10, 10), 20);     // 10 blocks of A times B's 2 a row
  EXPECT_EQ(kernels::estimated_tiles(100, 100, 10, 10), 100);  // dense: A's rows times B's columns
  EXPECT_EQ(kernels::estimated_tiles(100, 100, 10, 0), 0);
  // No overflow at the format's limits (2^31 blocks each, p 2^31 - 1).
  EXPECT_EQ(kernels::estimated_tiles(INT32_MAX, INT32_MAX, 1, INT32_MAX), INT32_MAX);
}

}  // namespace
}  // namespace blockmm::multiply
