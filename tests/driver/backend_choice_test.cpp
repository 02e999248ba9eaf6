// driver/backend_choice.hpp: the ranks that share a GPU, counted by (node, device UUID) keys, when
// CUDA starts, which GPUs a rank drives, and the work estimate "auto" decides on.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
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

// A file holding a COL380 header (and nothing else: the count reads the header alone).
std::string header_file(const std::filesystem::path& dir, const std::string& name, std::int32_t n, std::int32_t m,
                        std::int32_t k) {
  const std::filesystem::path path = dir / name;
  std::ofstream out(path, std::ios::binary);
  const std::int32_t header[3] = {n, m, k};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  return path.string();
}

TEST(AutomaticGpuCount, OneGpuForSmallProductsEveryGpuForLargeOrUnknownOnes) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("blockmm-gpu-count-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Options options;
  const auto count = [&](const std::string& a, const std::string& b) {
    options.a_path = a;
    options.b_path = b;
    return automatic_gpu_count(options);
  };
  // G1 (4.4e12 MACs) and D4 (8.5e12): one GPU. The n 65 536 m 8 quarter case (1.8e13) and a
  // dense m = 32 one: every GPU.
  EXPECT_EQ(count(header_file(dir, "g1a", 16384, 8, 4194304), header_file(dir, "g1b", 16384, 8, 4194304)), 1);
  EXPECT_EQ(count(header_file(dir, "d4a", 32768, 4, 33000000), header_file(dir, "d4b", 32768, 4, 33000000)), 1);
  EXPECT_EQ(count(header_file(dir, "q8a", 65536, 8, 16777216), header_file(dir, "q8b", 65536, 8, 16777216)), 0);
  EXPECT_EQ(count(header_file(dir, "h32a", 49152, 32, 2359296), header_file(dir, "h32b", 49152, 32, 2359296)), 0);
  // Near the bound from both sides: k^2 / p * m^3 against 1e13 at n 65 536, m 8.
  const double k_at_bound = std::sqrt(kOneGpuBelowMacs * 8192 / 512);
  EXPECT_EQ(count(header_file(dir, "lo_a", 65536, 8, static_cast<std::int32_t>(k_at_bound * 0.99)),
                  header_file(dir, "lo_b", 65536, 8, static_cast<std::int32_t>(k_at_bound * 0.99))), 1);
  EXPECT_EQ(count(header_file(dir, "hi_a", 65536, 8, static_cast<std::int32_t>(k_at_bound * 1.01)),
                  header_file(dir, "hi_b", 65536, 8, static_cast<std::int32_t>(k_at_bound * 1.01))), 0);
  // No estimate: every GPU. Shapes that differ, a header that is not one, a file too short, a
  // missing file, a folder.
  const std::string small = header_file(dir, "small", 1024, 8, 10);
  EXPECT_EQ(count(small, header_file(dir, "other_m", 1024, 4, 10)), 0);
  EXPECT_EQ(count(small, header_file(dir, "bad_m", 1024, 3, 10)), 0);
  EXPECT_EQ(count(small, header_file(dir, "neg_k", 1024, 8, -1)), 0);
  EXPECT_EQ(count(header_file(dir, "zero_n", 0, 8, 10), small), 0);
  {
    std::ofstream short_file(dir / "short", std::ios::binary);
    short_file << "abc";
  }
  EXPECT_EQ(count(small, (dir / "short").string()), 0);
  EXPECT_EQ(count(small, (dir / "missing").string()), 0);
  EXPECT_EQ(count(small, dir.string()), 0);
  EXPECT_EQ(count(small, small), 1);
  // --gpus given: its count, whatever the product.
  options.gpus_given = true;
  options.gpus = 2;
  EXPECT_EQ(count(small, small), 2);
  options.gpus = 0;  // --gpus all
  EXPECT_EQ(count(small, small), 0);
  std::filesystem::remove_all(dir);
}

TEST(WorkEstimate, EvenlySpreadBlocksSharedAmongRanks) {
  const MatrixShape shape{32768, 4};  // p = 8192
  const auto one = kernels::estimated_rank_work(shape, 1000000, 2000000, 1);
  EXPECT_EQ(one.rows, 8192);
  EXPECT_EQ(one.block_products, 1000000LL * 2000000 / 8192);
  EXPECT_EQ(one.input_blocks, 3000000);
  EXPECT_EQ(kernels::estimated_macs(one), one.block_products * 64);
  const auto three = kernels::estimated_rank_work(shape, 1000000, 2000000, 3);
  EXPECT_EQ(three.rows, 2731);  // ceil(8192 / 3)
  EXPECT_EQ(three.input_blocks, 1000000);
  // Saturates instead of overflowing (n = 2^31 - 1, m = 1, k = 2^31 - 1 each).
  const auto huge = kernels::estimated_rank_work(MatrixShape{2147483647, 1}, 2147483647, 2147483647, 1);
  EXPECT_GT(huge.block_products, 0);
  EXPECT_GT(kernels::estimated_macs(huge), 0);
}

}  // namespace
}  // namespace blockmm::driver
