// The cuda backend's device memory arithmetic and ledger (kernels/cuda/device_ledger.hpp), on the
// host: allocation footprints, an operand's device arrays against the host build's arrays for
// random records, the build's peak above them, cuBLAS's workspace, and the ledger's charges,
// reserve, peaks and observed usage. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/record_layout.hpp"
#include "kernels/cuda/device_ledger.hpp"
#include "operands/host_build.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::kernels::cuda {
namespace {

constexpr std::int64_t MiB = std::int64_t{1} << 20;

TEST(DeviceLedger, FootprintsAreWholePagesAboveOneMiBAnd512ByteUnitsBelow) {
  EXPECT_EQ(allocation_footprint(0), 0);
  EXPECT_EQ(allocation_footprint(1), 512);
  EXPECT_EQ(allocation_footprint(512), 512);
  EXPECT_EQ(allocation_footprint(513), 1024);
  EXPECT_EQ(allocation_footprint(MiB), MiB);
  EXPECT_EQ(allocation_footprint(MiB + 1), 2 * MiB);
  EXPECT_EQ(allocation_footprint(2 * MiB), 2 * MiB);
  EXPECT_EQ(allocation_footprint(2 * MiB + 1), 4 * MiB);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t bytes = std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 34)(rng);
    const std::int64_t unit = bytes <= MiB ? 512 : 2 * MiB;
    const std::int64_t footprint = allocation_footprint(bytes);
    EXPECT_GE(footprint, bytes);
    EXPECT_LT(footprint - bytes, unit);
    EXPECT_EQ(footprint % unit, 0) << bytes;
  }
}

// What the host build makes of random records, array by array, is what operand_device_bytes
// counts for the blocks kept (and at most that for every record).
TEST(DeviceLedger, OperandBytesAreTheFootprintsOfTheBuiltArrays) {
  std::mt19937_64 rng(11);
  for (int c = 0; c < 30; ++c) {
    // Some arrays over 1 MiB (whole pages) among them: m up to 100, up to 16 block-rows.
    testing::RandomSpec spec = testing::random_spec(rng, 60);
    if (c % 3 == 0) {
      spec.m = std::vector<std::int32_t>{8, 16, 32, 64, 100}[static_cast<std::size_t>(c % 5)];
      spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(1, 16)(rng);
    }
    const InputRecords records = testing::random_blocks(spec, rng);
    const std::int32_t p = records.shape.block_rows();
    for (const bool right : {false, true}) {
      const BlockMatrix matrix = operands::build_block_matrix(records, 0, p, right ? OperandRole::right : OperandRole::left,
                                                              [](std::int32_t, std::int32_t) { return std::string("dup"); });
      const auto fp = [](std::size_t count, std::size_t element) {
        return allocation_footprint(static_cast<std::int64_t>(count * element));
      };
      std::int64_t arrays = fp(matrix.row_ptr.size(), 4) + fp(matrix.col.size(), 4) + fp(matrix.values.size(), 2) +
                            fp(matrix.masks.size(), 8);
      if (right) arrays += fp(matrix.col_ptr.size(), 4) + fp(matrix.csc_row.size(), 4) + fp(matrix.csc_block.size(), 4);
      const std::string what = "case " + std::to_string(c) + (right ? " right" : " left");
      EXPECT_EQ(arrays, operand_device_bytes(matrix.blocks(), spec.m, p, p, right)) << what;
      EXPECT_LE(arrays, operand_device_bytes(records.size(), spec.m, p, p, right)) << what;
      EXPECT_GT(device_build_peak_bytes(records.size(), spec.m, p, p, right),
                operand_device_bytes(records.size(), spec.m, p, p, right) +
                    records.size() * record_bytes<std::uint16_t>(spec.m))
          << what;
    }
  }
}

// The case (n 4 096, m 8, 200 000 blocks, a 27.2 MB file): its device form is about its
// file's size, not the device build's peak that planning once took for it (128 MiB).
TEST(DeviceLedger, AnOperandFollowsItsRecords) {
  const std::int64_t records = 200000, file = records * record_bytes<std::uint16_t>(8);
  const std::int64_t a = operand_device_bytes(records, 8, 512, 512, false);
  const std::int64_t b = operand_device_bytes(records, 8, 512, 512, true);
  EXPECT_GT(a, file);
  EXPECT_LT(a, file * 115 / 100);
  EXPECT_LT(b, file * 125 / 100);
  EXPECT_GT(device_build_peak_bytes(records, 8, 512, 512, false), 2 * a);
}

TEST(DeviceLedger, CublasWorkspaceIsASixteenthOfTheRoomBetweenOneAnd32MiB) {
  EXPECT_EQ(cublas_workspace_bytes(-5), MiB);
  EXPECT_EQ(cublas_workspace_bytes(0), MiB);
  EXPECT_EQ(cublas_workspace_bytes(16 * MiB), MiB);
  EXPECT_EQ(cublas_workspace_bytes(64 * MiB), 4 * MiB);
  EXPECT_EQ(cublas_workspace_bytes(100 * MiB + 7), (100 * MiB + 7) / 16 / 256 * 256);
  EXPECT_EQ(cublas_workspace_bytes(std::int64_t{80} << 30), 32 * MiB);
  for (std::int64_t room = 0; room < (std::int64_t{1} << 32); room = room * 3 + 12345)
    EXPECT_EQ(cublas_workspace_bytes(room) % 256, 0) << room;
}

TEST(DeviceLedger, HoldsArraysAndTheReserveWhileABackendIsAttached) {
  DeviceLedger ledger;
  EXPECT_EQ(ledger.held(), 0);
  {
    const LedgerAttachment first(ledger);
    EXPECT_EQ(ledger.held(), kUncountedReserve);
    const LedgerAttachment second(ledger);  // two backends on one GPU: one reserve
    EXPECT_EQ(ledger.held(), kUncountedReserve);
    ledger.charge(3 * MiB);
    ledger.charge(MiB);
    EXPECT_EQ(ledger.arrays(), 4 * MiB);
    EXPECT_EQ(ledger.held(), kUncountedReserve + 4 * MiB);
    ledger.release(3 * MiB);
    EXPECT_EQ(ledger.held(), kUncountedReserve + MiB);
    EXPECT_EQ(ledger.peak(), kUncountedReserve + 4 * MiB);
    ledger.restart_peaks();  // a new product
    EXPECT_EQ(ledger.peak(), kUncountedReserve + MiB);
    ledger.charge(2 * MiB);
    EXPECT_EQ(ledger.peak(), kUncountedReserve + 3 * MiB);
    ledger.release(3 * MiB);
  }
  EXPECT_EQ(ledger.held(), 0);
  EXPECT_EQ(ledger.arrays(), 0);
}

TEST(DeviceLedger, ObservedUsageIsTheFreeMemoryBelowTheFirstBaseline) {
  DeviceLedger ledger;
  ledger.observe(100 * MiB);  // before any baseline: nothing to measure from
  EXPECT_EQ(ledger.observed_peak(), -1);
  EXPECT_EQ(ledger.beyond_arrays_peak(), -1);
  ledger.baseline(1000 * MiB);
  ledger.baseline(500 * MiB);  // a second backend on the GPU: the first baseline stays
  ledger.charge(10 * MiB);
  ledger.observe(988 * MiB);  // 12 MiB used, 2 of them beyond the arrays
  EXPECT_EQ(ledger.observed_peak(), 12 * MiB);
  EXPECT_EQ(ledger.beyond_arrays_peak(), 2 * MiB);
  ledger.release(10 * MiB);
  ledger.observe(997 * MiB);  // 3 MiB used, none of it arrays
  EXPECT_EQ(ledger.observed_peak(), 12 * MiB);
  EXPECT_EQ(ledger.beyond_arrays_peak(), 3 * MiB);
  ledger.restart_peaks();
  EXPECT_EQ(ledger.observed_peak(), 3 * MiB);
  EXPECT_EQ(ledger.beyond_arrays_peak(), 3 * MiB);
  EXPECT_FALSE(ledger.probing());
  ledger.probe_every_allocation();
  EXPECT_TRUE(ledger.probing());
}

// Threads charging and releasing at once (a team's backends, cuBLAS's preparation) leave the
// ledger where it began, its peak at least the largest one thread held.
TEST(DeviceLedger, ChargesFromSeveralThreadsAddUp) {
  DeviceLedger ledger;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&ledger, t] {
      for (int i = 0; i < 10000; ++i) {
        ledger.charge(512 * (t + 1));
        ledger.release(512 * (t + 1));
      }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ledger.held(), 0);
  EXPECT_GE(ledger.peak(), 4 * 512);
  EXPECT_LE(ledger.peak(), (1 + 2 + 3 + 4) * 512);
}

TEST(DeviceLedger, OneLedgerAGpuForTheProcess) {
  EXPECT_EQ(&device_ledger(0), &device_ledger(0));
  EXPECT_NE(&device_ledger(0), &device_ledger(1));
  EXPECT_EQ(&device_ledger(1000), &device_ledger(1000));
}

TEST(DeviceLedger, TheNumericMinimumHoldsTheSparsePathsPageSlack) {
  for (const std::int32_t m : {1, 8, 64, 2896})
    EXPECT_GE(numeric_minimum_bytes(m), page_slack(kSparsePathBuffers) + 4 * 128 * record_bytes<std::uint32_t>(m)) << m;
}

}  // namespace
}  // namespace blockmm::kernels::cuda
