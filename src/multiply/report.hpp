// What a distributed product reports: counts, the work's balance, bytes moved, the devices that
// ran it, and this rank's phase times. Values that need every rank (sums, per-rank lists) are
// the same on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend_steps.hpp"
#include "kernels/backend.hpp"
#include "multiply/phases.hpp"

namespace blockmm::multiply {

// One backend of a rank's team (one a GPU): its share of the work and what it moved.
struct WorkerReport {
  std::string device;
  std::int64_t block_products = 0;
  std::int32_t rows = 0;               // output block-rows it computed (rows split)
  std::int32_t b_panels = 0;           // columns split: B's panels it computed, and their block-columns
  std::int32_t b_columns = 0;
  std::int64_t b_blocks = 0;           // of B, the most it held at once
  std::int64_t bytes_from_peers = 0;   // operands copied from another backend (between GPUs: peer copies)
  std::int64_t bytes_built = 0;        // records it built operands from (for GPUs: uploaded)
  std::int64_t tiles = 0;
  double numeric_seconds = 0;
  double setup_seconds = 0;            // its GPU's start (context and staging), where it waited for it
  kernels::DeviceMemoryReport device_memory{};  // a GPU's: its budget and the peaks its memory reached
};

struct Report {
  std::string backend;
  std::string device;                     // this rank's (rank 0's, in the text)
  std::vector<std::string> rank_devices;  // what ran each rank's numeric phase
  std::int32_t n = 0;
  std::int32_t m = 0;
  std::int64_t a_records = 0;  // records in the files
  std::int64_t b_records = 0;
  std::int64_t a_blocks = 0;   // non-zero blocks used
  std::int64_t b_blocks = 0;
  std::int64_t c_blocks = 0;
  std::int64_t block_products = 0;
  std::vector<std::int64_t> rank_work;  // block products per rank
  std::vector<std::int64_t> rank_rows;  // block-rows per rank
  std::vector<std::int64_t> rank_bytes_exchanged;
  double imbalance = 1;                 // max/mean of rank_work
  std::int64_t numeric_chunks = 0;
  // How the ranks came by their records (partition::DistributionMethod, in words).
  std::string distribution = "one rank";
  // Rows shared with the neighbours (shared_rows.hpp): the output tiles of its neighbours'
  // panels each rank computed.
  bool shared_rows = false;
  std::vector<std::int64_t> rank_tiles_for_neighbours;
  // The ranks of each node read one copy of B (shared_right_operand.hpp), and B's records each
  // rank read or received (none on the other ranks of a node sharing B).
  bool b_shared_on_node = false;
  std::vector<std::int64_t> rank_b_records;
  // Record bytes the ranks took from the input files (or from their share of them), summed: once
  // A and B where one process reads both and its backends share them, more where ranks each read
  // them whole.
  std::int64_t input_bytes_read = 0;
  // Input moved through MPI, summed over the ranks that sent it (partition::ExchangeCounters).
  std::int64_t record_bytes_within_node = 0;
  std::int64_t record_bytes_between_nodes = 0;
  std::int64_t index_bytes_within_node = 0;
  std::int64_t index_bytes_between_nodes = 0;
  // Rank 0's backends' own steps (Backend::steps), each its longest over the team.
  BackendSteps backend_steps;
  // Rank 0's team: how its backends shared the work ("one backend" where there is one), and what
  // its plan did not take, each with why (plan.hpp).
  std::string team_layout = "one backend";
  std::vector<std::string> plan_refused;
  std::vector<WorkerReport> workers;
  // This rank's phases (commit and total are the caller's).
  PhaseTimes mine;
  // The labels of a relabelled product (partition/relabel.hpp), which the writer reads until the
  // output is committed; null where indices are the file's.
  std::shared_ptr<const std::vector<std::int32_t>> labels;

  std::int64_t useful_macs() const { return block_products * std::int64_t{m} * m * m; }
};

}  // namespace blockmm::multiply
