// A rank's plan: how its work lies over its W >= 1 backends. Host-only and unit-tested
// (tests/multiply/plan_test.cpp): every capability is taken whole, or refused with its reason
// (for --stats), never half taken. Two steps, since what the second weighs exists only after the
// first: the placement (how the rank comes by its records) before any record is read, the
// layout (rows or B's block-column panels over the backends) once the rank's records are known.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "multiply/options.hpp"

namespace blockmm::multiply {

struct PlacementFacts {
  int backends = 1;
  kernels::BackendTraits traits;
  int ranks = 1;
  int node_ranks = 1;            // ranks of this rank's node
  bool one_node = true;          // every rank on one node (BLOCKMM_SIMULATE_NODES counts)
  bool whole_inputs = false;     // every rank's backend would build both inputs whole
  Options options;
  std::int64_t a_host_bytes = 0; // host memory the rank's rows of A take (from the headers)
  std::int64_t b_host_bytes = 0; // host memory all of B takes where the rank holds it
};

struct PlacementPlan {
  bool whole_inputs = false;  // each rank builds both inputs whole and keeps its rows
  bool share_rows = false;    // rows shared with the neighbours, where partition finds it repays
  bool share_b = false;       // the ranks of a node may read one copy of B
  bool b_from_file = false;   // B is left in its file and read from it panel by panel
  std::int64_t b_room = 0;    // host bytes B's panels may take at once (0: no bound)
  std::vector<std::string> refused;  // what was not taken, and why
};

// Throws OutOfMemoryError (MemoryError in Python) where the rank's rows of A and a chunk alone
// exceed the host memory.
PlacementPlan plan_placement(const PlacementFacts& facts);

struct LayoutFacts {
  int backends = 1;
  int panels_asked = 0;
  bool shares = false;             // rows or B shared with other ranks (one operand a rank)
  std::int64_t a_bytes = 0;        // the rank's A on one backend (device bytes for a GPU)
  std::int64_t b_bytes = 0;        // the rank's B on one backend
  std::int64_t room = 0;           // what one backend may hold (0: no bound it knows)
  std::int64_t numeric_bytes = 0;  // a numeric phase's least, beside its operands
  std::int64_t pattern_bytes = 0;  // the rank's product pattern, all backends' (kernels::estimated_tiles): each
                                   // backend holds its panels' patterns until the numeric phase
  std::int64_t b_host_bytes = 0;   // the rank's B in host memory, where its backend builds it
  std::int64_t b_host_room = 0;    // host bytes B may take at once (0: no bound)
  std::int64_t host_memory = 0;    // the rank's host memory (--host-memory or its default), of which b_host_room is left
  bool host_memory_asked = false;  // --host-memory given
};

// The most panels the host memory may cut B into: each is built twice, each build a pass over
// B's file (docs/running.md, --host-memory, says why 64).
constexpr int kMaxHostMemoryPanels = 64;

struct LayoutPlan {
  bool split_columns = false;   // else rows: one backend, or the rank's rows split over the team
  int panels = 1;               // at least: the cut splits a panel past max_panel_bytes again
  std::int64_t max_panel_bytes = 0;  // of B on one backend (0: no bound)
  // Columns: A stays in host memory, read by the GPUs (OperandSpec::in_host_memory), where it
  // does not fit beside the numeric chunks.
  bool a_in_host_memory = false;
};

// Throws OutOfMemoryError where a numeric chunk alone exceeds a backend's room, and where the host
// memory would cut B into more than kMaxHostMemoryPanels panels (naming the least --host-memory
// that does not).
LayoutPlan plan_layout(const LayoutFacts& facts);

// "12 MiB", rounded up.
std::string mib(std::int64_t bytes);

}  // namespace blockmm::multiply
