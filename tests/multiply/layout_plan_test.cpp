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

LayoutPlan plan_team(int backends, std::int64_t a, std::int64_t b, std::int64_t room, std::int64_t numeric, int asked) {
  LayoutFacts facts;
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
    const std::string what = "case " + std::to_string(c);
    if (room <= numeric && a + b + numeric > room) {
      EXPECT_THROW((void)plan_team(backends, a, b, room, numeric, 0), ResourceError) << what;
      continue;
    }
    const LayoutPlan plan = plan_team(backends, a, b, room, numeric, 0);
    if (!plan.split_columns) {
      EXPECT_LE(a + b + numeric, room) << what;
      continue;
    }
    EXPECT_EQ(plan.a_in_host_memory, a + numeric >= room) << what;
    const std::int64_t left = room - numeric - (plan.a_in_host_memory ? 0 : a);
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
  const std::int64_t numeric = numeric_minimum_bytes(8);
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

}  // namespace
}  // namespace blockmm::multiply
