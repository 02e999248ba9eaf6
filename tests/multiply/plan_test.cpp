// The rank plan (multiply/plan.hpp) over every combination of what a run may ask and what its
// ranks and backends allow: each capability is taken exactly where the table of its conditions
// below says, refused with one line naming it everywhere else it was asked for, and what the
// placement takes never makes the layout split B on a rank that shares its operands. Then the
// layout's sizes, and the refusals that end a run (a host memory that would cut B too fine).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "multiply/plan.hpp"

namespace blockmm::multiply {
namespace {

kernels::BackendTraits traits_of(const std::string& kind) {
  kernels::BackendTraits traits;
  traits.computes_handed_out_tiles = kind == "cpu";
  traits.right_operand_shareable = kind != "cuda";
  traits.device = kind == "cuda";
  return traits;
}

int refusals_naming(const PlacementPlan& plan, const std::string& capability) {
  int count = 0;
  for (const std::string& line : plan.refused) count += line.rfind(capability + ":", 0) == 0 ? 1 : 0;
  return count;
}

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(RankPlan, EveryCombinationTakesOrRefusesEachCapability) {
  int combinations = 0;
  for (const std::string kind : {"cpu", "reference", "cuda"})
    for (const int backends : {1, 3})
      for (const int ranks : {1, 2})
        for (const bool one_node : {true, false})
          for (const bool whole : {false, true})
            for (const RowSharingMode rows : {RowSharingMode::automatic, RowSharingMode::off, RowSharingMode::on})
              for (const bool share_b : {true, false})
                for (const int panels : {0, 4})
                  for (const std::int64_t memory : {std::int64_t{0}, 100 * kMiB, 1000 * kMiB}) {
                    PlacementFacts facts;
                    facts.backends = backends;
                    facts.traits = traits_of(kind);
                    facts.ranks = ranks;
                    facts.one_node = one_node || ranks == 1;
                    facts.node_ranks = facts.one_node ? ranks : 1;
                    facts.whole_inputs = whole && ranks > 1 && facts.one_node;  // as builds_whole_inputs answers
                    facts.options.share_rows = rows;
                    facts.options.share_b = share_b;
                    facts.options.b_panels = panels;
                    facts.options.chunk_bytes = 10 * kMiB;
                    facts.options.host_memory = memory;
                    facts.options.host_memory_asked = memory > 0;
                    facts.a_host_bytes = 20 * kMiB;
                    facts.b_host_bytes = 300 * kMiB;  // past 100 MiB, within 1000 MiB
                    SCOPED_TRACE(kind + ", " + std::to_string(backends) + " backends, " + std::to_string(ranks) + " ranks, " +
                                 (facts.one_node ? "one node" : "nodes") + (whole ? ", whole" : "") + ", rows " +
                                 std::to_string(static_cast<int>(rows)) + (share_b ? ", share B" : "") + ", panels " +
                                 std::to_string(panels) + ", memory " + std::to_string(memory / kMiB));
                    const PlacementPlan plan = plan_placement(facts);
                    ++combinations;
                    const bool past = memory == 100 * kMiB;
                    const bool device = kind == "cuda";
                    const bool whole_ok = facts.whole_inputs && backends == 1 && panels == 0 && !(past && !device);
                    EXPECT_EQ(plan.whole_inputs, whole_ok);
                    EXPECT_EQ(refusals_naming(plan, "whole inputs"), facts.whole_inputs && !whole_ok ? 1 : 0);
                    EXPECT_EQ(plan.b_from_file, past && !plan.whole_inputs && facts.one_node);
                    EXPECT_EQ(plan.b_room, memory > 0 ? memory - 40 * kMiB : 0);
                    EXPECT_EQ(refusals_naming(plan, "B from its file"), past && !plan.whole_inputs && !facts.one_node ? 1 : 0);
                    const bool in_panels = panels > 0 || (past && !plan.whole_inputs);
                    const bool rows_asked = ranks > 1 && rows != RowSharingMode::off;
                    const bool rows_ok = rows_asked && backends == 1 && kind == "cpu" && facts.one_node && !plan.whole_inputs &&
                                         !in_panels;
                    EXPECT_EQ(plan.share_rows, rows_ok);
                    EXPECT_EQ(refusals_naming(plan, "rows shared with the neighbours"), rows_asked && !rows_ok ? 1 : 0);
                    const bool b_asked = ranks > 1 && share_b;
                    const bool b_ok = b_asked && !device && !plan.whole_inputs && !in_panels;
                    EXPECT_EQ(plan.share_b, b_ok);
                    EXPECT_EQ(refusals_naming(plan, "one copy of B a node"), b_asked && !b_ok ? 1 : 0);
                    // The layout of a rank placed so never splits B where it shares its operands:
                    // its B on the host is at most what the placement weighed.
                    LayoutFacts layout;
                    layout.backends = backends;
                    layout.panels_asked = panels;
                    layout.shares = plan.share_rows || plan.share_b;
                    layout.a_bytes = facts.a_host_bytes;
                    layout.b_bytes = facts.b_host_bytes / backends;
                    layout.b_host_bytes = device ? 0 : plan.share_b ? layout.b_bytes : facts.b_host_bytes;
                    layout.b_host_room = plan.b_room;
                    EXPECT_NO_THROW(plan_layout(layout));
                    EXPECT_EQ(plan_layout(layout).split_columns, panels > 0 || (in_panels && !device && !plan.whole_inputs));
                  }
  EXPECT_EQ(combinations, 3 * 2 * 2 * 2 * 2 * 3 * 2 * 2 * 3);
}

// The ranks of a node that may read one copy of B each hold a share of it: B past one rank's
// memory but not past the node's is shared, not read from its file.
TEST(RankPlan, ANodesCopyOfBCountsOnceAgainstItsRanksMemory) {
  PlacementFacts facts;
  facts.traits = traits_of("cpu");
  facts.options.host_memory = 240 * kMiB;
  facts.options.chunk_bytes = 10 * kMiB;
  facts.a_host_bytes = 20 * kMiB;  // 200 MiB left for B
  facts.b_host_bytes = 300 * kMiB;
  facts.ranks = facts.node_ranks = 2;
  PlacementPlan plan = plan_placement(facts);
  EXPECT_TRUE(plan.share_b);
  EXPECT_FALSE(plan.b_from_file);
  facts.options.share_b = false;  // each rank its own copy: past its memory
  plan = plan_placement(facts);
  EXPECT_FALSE(plan.share_b);
  EXPECT_TRUE(plan.b_from_file);
  facts.options.share_b = true;
  facts.node_ranks = 1;  // alone on its node (nodes simulated): the same
  EXPECT_TRUE(plan_placement(facts).b_from_file);
}

TEST(RankPlan, AHostMemoryThatCannotHoldAIsRefusedOnlyWhereAskedFor) {
  PlacementFacts facts;
  facts.options.host_memory = 64 * kMiB;
  facts.options.chunk_bytes = 16 * kMiB;
  facts.a_host_bytes = 60 * kMiB;
  facts.b_host_bytes = 500 * kMiB;
  facts.options.host_memory_asked = true;
  try {
    plan_placement(facts);
    FAIL() << "no refusal";
  } catch (const OutOfMemoryError& e) {  // a memory refusal by type: MemoryError in Python
    EXPECT_EQ(std::string(e.what()),
              "this rank's rows of A (60 MiB) and two output chunks (32 MiB) take more than --host-memory (64 MiB): "
              "raise it, use more ranks (they split A's rows) or a smaller --chunk-size");
  }
  facts.options.host_memory_asked = false;  // the node's memory, by default: as without a bound
  const PlacementPlan plan = plan_placement(facts);
  EXPECT_EQ(plan.b_room, 0);
  EXPECT_FALSE(plan.b_from_file);
}

TEST(RankPlan, LayoutSizesPanelsByTheRoomLeft) {
  LayoutFacts facts;
  facts.backends = 2;
  facts.a_bytes = 100;
  facts.b_bytes = 1000;
  facts.numeric_bytes = 50;
  EXPECT_FALSE(plan_layout(facts).split_columns);  // no bound
  facts.room = 1150;
  EXPECT_FALSE(plan_layout(facts).split_columns);  // everything fits
  facts.room = 500;  // 350 left beside A and a chunk, 280 a panel: 4 panels, 2 rounds of 2
  LayoutPlan plan = plan_layout(facts);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_EQ(plan.max_panel_bytes, 280);
  EXPECT_EQ(plan.panels, 4);
  // The host's room, shared by the backends that each hold a panel at once, bounds it further.
  facts.b_host_bytes = 2000;
  facts.b_host_room = 500;  // 250 a backend, 200 a panel: 5 needed, 3 rounds of 2
  plan = plan_layout(facts);
  EXPECT_EQ(plan.max_panel_bytes, 200);
  EXPECT_EQ(plan.panels, 6);
  facts.room = 0;  // a host backend: the host's room alone
  EXPECT_EQ(plan_layout(facts).max_panel_bytes, 200);
  facts.b_host_room = 5000;
  EXPECT_FALSE(plan_layout(facts).split_columns);
  facts.panels_asked = 7;  // asked for: so many, whatever the memory
  plan = plan_layout(facts);
  EXPECT_TRUE(plan.split_columns);
  EXPECT_EQ(plan.panels, 7);
  EXPECT_EQ(plan.max_panel_bytes, 0);
}

TEST(RankPlan, LayoutRefusesWhatNoPanelCutMakesFitAndKeepsSharedOperandsWhole) {
  LayoutFacts facts;
  facts.a_bytes = 100 * kMiB;
  facts.b_bytes = 100 * kMiB;
  facts.numeric_bytes = 20 * kMiB;
  facts.room = 16 * kMiB;  // a numeric chunk alone does not fit (A would stay in host memory)
  EXPECT_THROW(plan_layout(facts), OutOfMemoryError);
  facts.room = 0;
  facts.shares = true;  // a rank that shares its operands keeps B whole past the host memory
  facts.b_host_bytes = 100 * kMiB;
  facts.b_host_room = 10 * kMiB;
  EXPECT_FALSE(plan_layout(facts).split_columns);
  facts.room = 50 * kMiB;  // (a GPU's room: GPUs never share their operands)
  EXPECT_THROW(plan_layout(facts), Error);
}

// A --host-memory just above A and two chunks once cut B into up to 2^20 panels, each built twice
// from B's file (some 240 TB read for a 10 GB B). Past kMaxHostMemoryPanels the plan refuses
// (exit 5), naming the least --host-memory that runs; that much, or more, plans at most so many.
TEST(RankPlan, AHostMemoryThatWouldCutBIntoTooManyPanelsIsRefusedNamingTheLeastThatRuns) {
  for (const int backends : {1, 3}) {
    SCOPED_TRACE(std::to_string(backends) + " backends");
    LayoutFacts facts;
    facts.backends = backends;
    facts.a_bytes = 100 * kMiB;
    facts.b_bytes = 10240 * kMiB;
    facts.b_host_bytes = facts.b_bytes * backends;
    facts.numeric_bytes = 20 * kMiB;
    facts.host_memory_asked = true;
    const std::int64_t beside_b = facts.a_bytes + 2 * 256 * kMiB;  // A's rows and two chunks
    const auto plan_with = [&](std::int64_t host_memory) {
      facts.host_memory = host_memory;
      facts.b_host_room = host_memory - beside_b;
      return plan_layout(facts);
    };
    std::string said;
    try {
      plan_with(beside_b + 1);
      FAIL() << "a byte of room for B was planned";
    } catch (const OutOfMemoryError& e) {
      said = e.what();
    }
    EXPECT_EQ(said.rfind("B (10240 MiB on this rank) would be cut into ", 0), 0u) << said;
    EXPECT_NE(said.find(" panels to fit --host-memory (613 MiB), each built twice from B; past 64 panels, reading B "
                        "costs more than the product: give --host-memory "),
              std::string::npos)
        << said;
    const std::size_t at = said.rfind("give --host-memory ") + 19;
    const std::int64_t least = std::stoll(said.substr(at)) * kMiB;
    const LayoutPlan plan = plan_with(least);
    EXPECT_TRUE(plan.split_columns);
    EXPECT_LE(plan.panels, kMaxHostMemoryPanels);
    EXPECT_GT(plan.panels, kMaxHostMemoryPanels / 2) << "the least --host-memory named is far from the least";
    EXPECT_LE(plan_with(2 * least).panels, kMaxHostMemoryPanels);
    EXPECT_THROW(plan_with(beside_b + (least - beside_b) * 9 / 10), OutOfMemoryError);
    // A GPU's room, not the host's, sizing the panels: as many as it takes (B streamed from memory).
    facts.room = facts.a_bytes + facts.numeric_bytes + 8 * kMiB;
    facts.b_host_bytes = 0;
    EXPECT_GT(plan_with(beside_b + 1).panels, kMaxHostMemoryPanels);
    facts.room = 0;
  }
}

}  // namespace
}  // namespace blockmm::multiply
