#include "multiply/plan.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace blockmm::multiply {

std::string mib(std::int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

PlacementPlan plan_placement(const PlacementFacts& facts) {
  const Options& options = facts.options;
  PlacementPlan plan;
  if (options.host_memory > 0) {
    // A chunk is computed while the one before it is written.
    plan.b_room = options.host_memory - facts.a_host_bytes - 2 * options.chunk_bytes;
    if (plan.b_room <= 0 && options.host_memory_asked)
      throw OutOfMemoryError("this rank's rows of A (" + mib(facts.a_host_bytes) + ") and two output chunks (" +
                          mib(2 * options.chunk_bytes) + ") take more than --host-memory (" + mib(options.host_memory) +
                          "): raise it, use more ranks (they split A's rows) or a smaller --chunk-size");
    plan.b_room = std::max<std::int64_t>(0, plan.b_room);  // a default that cannot hold A: no bound, as before it
  }
  // Whole inputs: a GPU reads B from its file onto itself; a host backend holds it. Where the
  // node's ranks may read one copy of B, each holds its share of that copy.
  const bool several = facts.ranks > 1;
  const bool node_b = several && options.share_b && facts.traits.right_operand_shareable && options.b_panels == 0;
  const bool past_room = plan.b_room > 0 && facts.b_host_bytes / (node_b ? facts.node_ranks : 1) > plan.b_room;
  const bool asked = options.b_panels > 0;
  if (facts.whole_inputs) {
    const char* why = facts.backends > 1                      ? "a team builds from its rank's records"
                      : asked                                 ? "B is asked for in panels"
                      : past_room && !facts.traits.device     ? "B is past --host-memory"
                                                              : nullptr;
    plan.whole_inputs = why == nullptr;
    if (why != nullptr) plan.refused.push_back(std::string("whole inputs: ") + why);
  }
  if (past_room && !plan.whole_inputs) {
    plan.b_from_file = !several || facts.one_node;
    if (!plan.b_from_file)
      plan.refused.push_back("B from its file: across nodes its rows arrive through MPI and are held; its panels are cut from them");
  }
  const char* panels = asked ? "B is asked for in panels" : past_room && !plan.whole_inputs ? "B is past --host-memory" : nullptr;
  if (several && options.share_rows != RowSharingMode::off) {
    const char* why = facts.backends > 1                       ? "its rank's rows are split over a team"
                      : !facts.traits.computes_handed_out_tiles ? "the backend computes whole patterns only"
                      : !facts.one_node                         ? "the ranks are on several nodes"
                      : plan.whole_inputs                       ? "each rank builds whole inputs"
                                                                : panels;
    plan.share_rows = why == nullptr;
    if (why != nullptr) plan.refused.push_back(std::string("rows shared with the neighbours: ") + why);
  }
  if (several && options.share_b) {
    const char* why = !facts.traits.right_operand_shareable ? "the backend's operands are not in host memory"
                      : plan.whole_inputs                    ? "each rank builds whole inputs"
                                                             : panels;
    plan.share_b = why == nullptr;
    if (why != nullptr) plan.refused.push_back(std::string("one copy of B a node: ") + why);
  }
  return plan;
}

namespace {

// The refusal of a host memory that cuts B into `panels` panels, more than kMaxHostMemoryPanels,
// with the least --host-memory that does not: the room whose host cap, floor(floor(R / W) * 4 / 5),
// holds B in the most panels the limit allows, rounds of W (plan_layout's own rule, inverted).
[[noreturn]] void refuse_host_memory_panels(const LayoutFacts& facts, std::int64_t panels) {
  const std::int64_t backends = std::max(1, facts.backends);
  const std::int64_t most = std::max<std::int64_t>(1, kMaxHostMemoryPanels / backends) * backends;
  const std::int64_t cap = (facts.b_bytes + most - 1) / most;
  const std::int64_t room = (5 * cap + 3) / 4 * backends;
  const std::int64_t least = facts.host_memory - facts.b_host_room + room;
  throw OutOfMemoryError("B (" + mib(facts.b_bytes) + " on this rank) would be cut into " + std::to_string(panels) +
                         " panels to fit " +
                         (facts.host_memory_asked ? "--host-memory (" : "the host memory (the default --host-memory, ") +
                         mib(facts.host_memory) + "), each built twice from B; past " +
                         std::to_string(kMaxHostMemoryPanels) + " panels, reading B costs more than the product: " +
                         "give --host-memory " + mib(least) + " or more");
}

}  // namespace

LayoutPlan plan_layout(const LayoutFacts& facts) {
  LayoutPlan plan;
  const int backends = std::max(1, facts.backends);
  if (facts.panels_asked > 0) {  // (tests: more panels than backends are streamed, one at a time)
    plan.split_columns = true;
    plan.panels = facts.panels_asked;
    return plan;
  }
  // What one backend's panel of B may take: what its room leaves beside A and a numeric chunk,
  // and the host memory's share of each backend (they hold a panel each at once), a fifth to
  // spare (the cut is by work, and panels hold B's blocks unevenly).
  std::int64_t cap = 0;
  const std::int64_t beside = facts.numeric_bytes + facts.pattern_bytes / backends;  // a backend's share
  if (facts.room > 0 && facts.a_bytes + facts.b_bytes + beside > facts.room) {
    std::int64_t left = facts.room - facts.a_bytes - beside;
    if (left <= 0) {  // A stays in host memory, which the GPUs read: the room is the panels'
      plan.a_in_host_memory = true;
      left = facts.room - beside;
    }
    if (left <= 0)
      throw OutOfMemoryError("each GPU must hold a numeric chunk (" + mib(facts.numeric_bytes) +
                          ") and its share of the product's pattern (" + mib(facts.pattern_bytes / backends) +
                          ") beside B's panels, more than its memory budget leaves (" + mib(facts.room) +
                          "): raise --mem-budget");
    cap = std::max<std::int64_t>(1, left * 4 / 5);
  }
  // (A rank that shares its operands keeps B whole: the placement weighed B for the node, and
  // where the node's ranks do not all need it whole, each holds only its share of B's rows.)
  bool host_bound = false;  // the host memory, not a GPU's, sizes the panels
  if (facts.b_host_room > 0 && facts.b_host_bytes > facts.b_host_room && !facts.shares) {
    const std::int64_t host_cap = std::max<std::int64_t>(1, facts.b_host_room / backends * 4 / 5);
    host_bound = cap == 0 || host_cap < cap;
    cap = cap > 0 ? std::min(cap, host_cap) : host_cap;
  }
  if (cap == 0) return plan;
  if (facts.shares) throw Error(ExitCode::other, "internal error: B split into panels on a rank that shares its operands");
  plan.split_columns = true;
  plan.max_panel_bytes = cap;
  const std::int64_t needed = (facts.b_bytes + cap - 1) / cap;
  const std::int64_t rounds = std::max<std::int64_t>(1, (needed + backends - 1) / backends);
  if (host_bound && rounds * backends > kMaxHostMemoryPanels) refuse_host_memory_panels(facts, rounds * backends);
  plan.panels = static_cast<int>(std::min<std::int64_t>(rounds * backends, 1 << 20));
  return plan;
}

}  // namespace blockmm::multiply
