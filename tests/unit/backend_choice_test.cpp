// driver/backend_choice.hpp: the ranks that share a GPU, counted by (node, device UUID) keys, when
// CUDA's driver starts loading, and the work estimate "auto" decides on.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
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

// The driver load before MPI_Init starts only where a GPU is likely: --backend cuda, or auto with
// inputs of kAutoCudaWarmUpInputBytes or more on disk (sparse files here: nothing is read).
TEST(CudaDriverLoad, StartsOnlyWhereTheRunWillProbablyWantAGpu) {
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
  const auto started = [&](const std::string& backend) {
    options.backend = backend;
    const std::shared_future<void> load = start_cuda_driver_load(options);
    if (load.valid()) load.wait();  // without a GPU (CI) it returns at once
    return load.valid();
  };
  EXPECT_TRUE(started("cuda"));
  EXPECT_FALSE(started("cpu"));
  EXPECT_FALSE(started("reference"));
  EXPECT_FALSE(started("auto"));  // 32 MiB and 1000 bytes
  options.a_path = sized("large.bin", kAutoCudaWarmUpInputBytes / 2);
  EXPECT_TRUE(started("auto"));  // together 64 MiB
  options.a_path = dir;  // not a regular file: not counted
  EXPECT_FALSE(started("auto"));
  options.a_path = dir + "/missing.bin";
  EXPECT_FALSE(started("auto"));
  for (const char* name : {"small.bin", "half.bin", "large.bin"}) std::remove((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

std::string visibility(const std::vector<std::pair<std::string, std::string>>& env, bool uses_mpi,
                       const std::vector<std::string>& node_gpus = {}) {
  return cuda_visibility_setting(
      [&](const char* name) -> const char* {
        for (const auto& [key, value] : env)
          if (key == name) return value.c_str();
        return nullptr;
      },
      uses_mpi, node_gpus);
}

TEST(CudaVisibility, AProcessAloneOnItsNodeSeesOnlyTheGpuItUses) {
  EXPECT_EQ(visibility({}, false), "CUDA_VISIBLE_DEVICES=0");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "3,1"}}, false), "CUDA_VISIBLE_DEVICES=3");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", " GPU-ab12 , GPU-cd34"}}, false), "CUDA_VISIBLE_DEVICES=GPU-ab12");
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}, true),
            "CUDA_VISIBLE_DEVICES=0");
  EXPECT_EQ(visibility({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "4"}}, true),
            "CUDA_VISIBLE_DEVICES=0");
}

TEST(CudaVisibility, RanksSharingANodeTakeTheirEntryOfTheUsersList) {
  const std::pair<std::string, std::string> list{"CUDA_VISIBLE_DEVICES", "4,5,6"};
  for (int r = 0; r < 7; ++r) {
    SCOPED_TRACE(r);
    const std::string expected = "CUDA_VISIBLE_DEVICES=" + std::to_string(4 + r % 3);
    EXPECT_EQ(visibility({list, {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "7"}},
                         true),
              expected);
    EXPECT_EQ(visibility({list, {"SLURM_LOCALID", std::to_string(r)}, {"SLURM_STEP_NUM_TASKS", "14"},
                          {"SLURM_STEP_NUM_NODES", "2"}},
                         true),
              expected);
  }
}

TEST(CudaVisibility, NothingWhereTheEnvironmentDoesNotTell) {
  // Several ranks a node and no list: how many GPUs CUDA will see is known only to CUDA.
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, true), "");
  EXPECT_EQ(visibility({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "2"}}, true), "");
  // A launcher that tells no local rank (MPICH's Hydra, say), or a garbled one.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"PMI_RANK", "1"}}, true), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}, true), "");
  // The user's own choice of no GPU or of one GPU stands.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", ""}}, false), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "2"}}, false), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", " , "}}, false), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "GPU-ab12"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
                       true),
            "");
}

TEST(CudaVisibility, RanksSharingANodeWithoutAListTakeTheirGpuOfTheNode) {
  const std::vector<std::string> gpus{"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  for (int r = 0; r < 6; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "6"}}, true,
                         gpus),
              "CUDA_VISIBLE_DEVICES=" + gpus[static_cast<std::size_t>(r) % 4]);
  }
  // One GPU on the node, or none known: nothing to narrow.
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, true, {"GPU-a"}), "");
  // A list of the user's wins over the node's GPUs.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "7,6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                       true, gpus),
            "CUDA_VISIBLE_DEVICES=6");
}

// A driver's /proc/driver/nvidia and /dev, written out: GPUs in bus order, one excluded, one
// whose device node is missing (a container given three of four GPUs).
class NodeGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/blockmm-node-gpus-" + std::to_string(::getpid());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ + "/dev");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void gpu(const std::string& bus, const std::string& uuid, int minor, bool excluded = false, bool device_node = true) {
    const std::string dir = root_ + "/proc/gpus/" + bus;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/information") << "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t " << uuid
                                         << "\nBus Location: \t " << bus << "\nDevice Minor: \t " << minor
                                         << "\nGPU Excluded:\t " << (excluded ? "Yes" : "No") << "\n";
    std::filesystem::create_directories(root_ + "/proc/capabilities/gpu" + std::to_string(minor) + "/mig");
    if (device_node) std::ofstream(root_ + "/dev/nvidia" + std::to_string(minor)) << "";
  }
  std::vector<std::string> uuids() const { return node_gpu_uuids(root_ + "/proc", root_ + "/dev"); }
  std::string root_;
};

TEST_F(NodeGpus, UsableGpusInBusOrder) {
  gpu("0000:00:09.0", "GPU-d", 3);
  gpu("0000:00:06.0", "GPU-a", 0);
  gpu("0000:00:08.0", "GPU-c", 2, /*excluded=*/true);
  gpu("0000:00:07.0", "GPU-b", 1, false, /*device_node=*/false);
  EXPECT_EQ(uuids(), (std::vector<std::string>{"GPU-a", "GPU-d"}));
}

TEST_F(NodeGpus, MigInstancesOrMissingFilesLeaveTheChoiceToCuda) {
  EXPECT_EQ(uuids(), std::vector<std::string>{});  // no driver files
  gpu("0000:00:06.0", "GPU-a", 0);
  gpu("0000:00:07.0", "GPU-b", 1);
  EXPECT_EQ(uuids(), (std::vector<std::string>{"GPU-a", "GPU-b"}));
  std::filesystem::create_directories(root_ + "/proc/capabilities/gpu1/mig/gi1");
  EXPECT_EQ(uuids(), std::vector<std::string>{});
}

TEST(WorkEstimate, EvenlySpreadBlocksSharedAmongRanks) {
  const MatrixShape shape{32768, 4};  // p = 8192
  const auto one = estimated_rank_work(shape, 1000000, 2000000, 1);
  EXPECT_EQ(one.rows, 8192);
  EXPECT_EQ(one.block_products, 1000000LL * 2000000 / 8192);
  EXPECT_EQ(one.input_blocks, 3000000);
  EXPECT_EQ(estimated_macs(one), one.block_products * 64);
  const auto three = estimated_rank_work(shape, 1000000, 2000000, 3);
  EXPECT_EQ(three.rows, 2731);  // ceil(8192 / 3)
  EXPECT_EQ(three.input_blocks, 1000000);
  // Saturates instead of overflowing (n = 2^31 - 1, m = 1, k = 2^31 - 1 each).
  const auto huge = estimated_rank_work(MatrixShape{2147483647, 1}, 2147483647, 2147483647, 1);
  EXPECT_GT(huge.block_products, 0);
  EXPECT_GT(estimated_macs(huge), 0);
}

std::string connections(const char* value) {
  return cuda_connections_setting([&](const char* name) -> const char* {
    return std::string(name) == "CUDA_DEVICE_MAX_CONNECTIONS" ? value : nullptr;
  });
}

TEST(CudaConnections, OneWorkQueueUnlessTheUserChoseACount) {
  EXPECT_EQ(connections(nullptr), "CUDA_DEVICE_MAX_CONNECTIONS=1");
  EXPECT_EQ(connections(""), "CUDA_DEVICE_MAX_CONNECTIONS=1");  // empty counts as not set
  EXPECT_EQ(connections("8"), "");
  EXPECT_EQ(connections("1"), "");
  EXPECT_EQ(connections("32"), "");
}

}  // namespace
}  // namespace blockmm::driver
