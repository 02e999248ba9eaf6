// driver/backend_choice.hpp: the ranks that share a GPU, counted by (node, device UUID) keys, when
// CUDA starts, which GPUs a rank drives, and the work estimate "auto" decides on.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "driver/backend_choice.hpp"

namespace blockmm::driver {
namespace {

TEST(GpuSharers, RanksWithTheirOwnGpuShareItWithNoOne) {
  // Slurm --gpus-per-task=1 on two nodes: every rank sees "device 0", each a different GPU.
  const std::vector<std::int64_t> keys = {11, 12, 13, 14};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(count_equal_keys(keys, r), 1);
}

TEST(GpuSharers, RanksOnOneGpuAreCountedPerGpu) {
  // Three ranks on GPU 5 of a node, one on GPU 6, two on another node's GPU 5 (other key).
  const std::vector<std::int64_t> keys = {5, 6, 5, 5, 7, 7};
  EXPECT_EQ(count_equal_keys(keys, 0), 3);
  EXPECT_EQ(count_equal_keys(keys, 1), 1);
  EXPECT_EQ(count_equal_keys(keys, 3), 3);
  EXPECT_EQ(count_equal_keys(keys, 5), 2);
}

TEST(GpuSharers, AnUnknownDeviceAnywhereMeansCountAsBefore) {
  EXPECT_EQ(count_equal_keys({5, 0, 5}, 0), 0);
  EXPECT_EQ(count_equal_keys({0}, 0), 0);
}

TEST(GpuSharers, RandomKeysAgainstABruteForceCount) {
  std::mt19937_64 rng(16);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::int64_t> keys(1 + rng() % 40);
    for (auto& k : keys) k = 1 + static_cast<std::int64_t>(rng() % 5);
    for (int r = 0; r < static_cast<int>(keys.size()); ++r) {
      int same = 0;
      for (const std::int64_t k : keys) same += k == keys[r];
      EXPECT_EQ(count_equal_keys(keys, r), same);
    }
  }
}

// CUDA starts before MPI_Init only where a GPU is likely: --backend cuda, or auto with inputs of
// kAutoCudaWarmUpInputBytes or more on disk (sparse files here: nothing is read).
TEST(CudaLikely, OnlyWhereTheRunWillProbablyWantAGpu) {
  const std::string dir = ::testing::TempDir() + "blockmm_driver_load_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const auto sized = [&](const std::string& name, std::int64_t bytes) {
    const std::string path = dir + "/" + name;
    std::ofstream(path).close();
    EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes)), 0);
    return path;
  };
  Options options;
  options.a_path = sized("small.bin", 1000);
  options.b_path = sized("half.bin", kAutoCudaWarmUpInputBytes / 2);
  const auto likely = [&](std::optional<kernels::BackendKind> backend) {
    options.backend = backend;
    return cuda_likely(options, input_file_bytes(options));
  };
  EXPECT_TRUE(likely(kernels::BackendKind::cuda));
  EXPECT_FALSE(likely(kernels::BackendKind::cpu));
  EXPECT_FALSE(likely(kernels::BackendKind::reference));
  EXPECT_FALSE(likely(std::nullopt));  // 32 MiB and 1000 bytes
  options.a_path = sized("large.bin", kAutoCudaWarmUpInputBytes / 2);
  EXPECT_TRUE(likely(std::nullopt));  // together 64 MiB
  options.a_path = dir;  // not a regular file: not counted
  EXPECT_FALSE(likely(std::nullopt));
  options.a_path = dir + "/missing.bin";
  EXPECT_FALSE(likely(std::nullopt));
  for (const char* name : {"small.bin", "half.bin", "large.bin"}) std::remove((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

TEST(WorkEstimate, EvenlySpreadBlocksSharedAmongRanks) {
  const MatrixShape shape{32768, 4};  // p = 8192
  const auto one = multiply::estimated_rank_work(shape, 1000000, 2000000, 1);
  EXPECT_EQ(one.rows, 8192);
  EXPECT_EQ(one.block_products, 1000000LL * 2000000 / 8192);
  EXPECT_EQ(one.input_blocks, 3000000);
  EXPECT_EQ(multiply::estimated_macs(one), one.block_products * 64);
  const auto three = multiply::estimated_rank_work(shape, 1000000, 2000000, 3);
  EXPECT_EQ(three.rows, 2731);  // ceil(8192 / 3)
  EXPECT_EQ(three.input_blocks, 1000000);
  // Saturates instead of overflowing (n = 2^31 - 1, m = 1, k = 2^31 - 1 each).
  const auto huge = multiply::estimated_rank_work(MatrixShape{2147483647, 1}, 2147483647, 2147483647, 1);
  EXPECT_GT(huge.block_products, 0);
  EXPECT_GT(multiply::estimated_macs(huge), 0);
}

}  // namespace
}  // namespace blockmm::driver
