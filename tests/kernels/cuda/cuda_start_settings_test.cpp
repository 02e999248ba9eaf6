// kernels/cuda_start.hpp, what CUDA starts with: which GPUs a process sees and drives, the
// node's GPUs from the driver's files, and one work queue a context. Plain C++: runs on CI.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "comm/launcher.hpp"
#include "kernels/cuda_start.hpp"

namespace blockmm::kernels {
namespace {

using Environment = std::vector<std::pair<std::string, std::string>>;

EnvironmentLookup lookup_in(const Environment& env) {
  return [&env](const char* name) -> const char* {
    for (const auto& [key, value] : env)
      if (key == name) return value.c_str();
    return nullptr;
  };
}

// The setting as main makes it: the launcher's placement read from the same variables.
std::string visibility(const Environment& env, bool uses_mpi, const std::vector<std::string>& node_gpus = {},
                       int wanted = 0) {
  const EnvironmentLookup lookup = lookup_in(env);
  NodePlace place;
  if (uses_mpi) {
    const comm::LauncherPlacement placement = comm::launcher_placement(lookup);
    place.known = placement.knows_local_rank() && placement.local_size() > 0;
    place.local_rank = place.known ? placement.local_rank() : 0;
    place.local_ranks = place.known ? placement.local_size() : 1;
  }
  return cuda_visibility_setting(lookup, place, wanted, node_gpus);
}

TEST(GpuShare, RanksOfANodeSplitItsGpusOrShareThem) {
  // At least as many GPUs as ranks: contiguous shares, each rank's own.
  EXPECT_EQ(gpu_share(4, {true, 0, 1}, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(gpu_share(4, {true, 0, 2}, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpu_share(4, {true, 1, 2}, 0), (std::vector<int>{2, 3}));
  EXPECT_EQ(gpu_share(8, {true, 2, 3}, 0), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(gpu_share(4, {true, 0, 1}, 2), (std::vector<int>{0, 1}));  // --gpus 2
  // Fewer GPUs than ranks: one each, shared round the GPUs.
  for (int r = 0; r < 6; ++r) EXPECT_EQ(gpu_share(4, {true, r, 6}, 0), std::vector<int>{r % 4});
  EXPECT_EQ(gpu_share(0, {true, 0, 1}, 0), std::vector<int>{});
}

TEST(GpuShare, EveryGpuOnceWhereThereAreEnoughRandomly) {
  std::mt19937 rng(39);
  for (int trial = 0; trial < 300; ++trial) {
    const int gpus = 1 + static_cast<int>(rng() % 16), ranks = 1 + static_cast<int>(rng() % 16);
    std::vector<int> taken(static_cast<std::size_t>(gpus), 0);
    for (int r = 0; r < ranks; ++r)
      for (const int g : gpu_share(gpus, {true, r, ranks}, 0)) ++taken[static_cast<std::size_t>(g)];
    for (const int t : taken) {
      if (gpus >= ranks) EXPECT_EQ(t, 1) << gpus << " GPUs, " << ranks << " ranks";
      else EXPECT_GE(t, 1);
    }
  }
}

TEST(CudaVisibility, AProcessAloneOnItsNodeSeesTheGpusItDrives) {
  const std::vector<std::string> gpus{"GPU-a", "GPU-b"};
  EXPECT_EQ(visibility({}, false, gpus), "");  // all of them: nothing to narrow
  EXPECT_EQ(visibility({}, false, gpus, 1), "CUDA_VISIBLE_DEVICES=GPU-a");  // --gpus 1
  EXPECT_EQ(visibility({}, false, {}, 1), "CUDA_VISIBLE_DEVICES=0");  // no driver files: CUDA's first
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "3,1"}}, false, gpus, 1), "CUDA_VISIBLE_DEVICES=3");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "3,1"}}, false, gpus), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", " GPU-ab12 , GPU-cd34"}}, false, {}, 1),
            "CUDA_VISIBLE_DEVICES=GPU-ab12");
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}, true, gpus, 1),
            "CUDA_VISIBLE_DEVICES=GPU-a");
  EXPECT_EQ(visibility({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "4"}}, true, gpus),
            "");
}

TEST(CudaVisibility, RanksSharingANodeTakeTheirShareOfTheUsersList) {
  const std::pair<std::string, std::string> list{"CUDA_VISIBLE_DEVICES", "4,5,6"};
  for (int r = 0; r < 7; ++r) {
    SCOPED_TRACE(r);
    const std::string expected = "CUDA_VISIBLE_DEVICES=" + std::to_string(4 + r % 3);
    EXPECT_EQ(visibility({list, {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "7"}},
                         true),
              expected);
  }
  // Two ranks, four GPUs: two each.
  const std::pair<std::string, std::string> four{"CUDA_VISIBLE_DEVICES", "0,1,2,3"};
  EXPECT_EQ(visibility({four, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, true),
            "CUDA_VISIBLE_DEVICES=2,3");
  // Slurm with one node: the step's tasks are the node's.
  EXPECT_EQ(visibility({four, {"SLURM_LOCALID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "1"}}, true),
            "CUDA_VISIBLE_DEVICES=3");
}

TEST(CudaVisibility, NothingWhereTheEnvironmentDoesNotTell) {
  // Several ranks a node and no list: how many GPUs CUDA will see is known only to CUDA.
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, true), "");
  // Slurm across nodes tells no local count.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"},
                        {"SLURM_STEP_NUM_NODES", "2"}},
                       true),
            "");
  // A launcher that tells no local rank (MPICH's Hydra, say), or a garbled one.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"PMI_RANK", "1"}}, true), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}, true), "");
  // The user's own choice of no GPU or of one GPU stands.
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", ""}}, false, {"GPU-a", "GPU-b"}, 1), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "2"}}, false, {}, 1), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", " , "}}, false, {}, 1), "");
  EXPECT_EQ(visibility({{"CUDA_VISIBLE_DEVICES", "GPU-ab12"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
                       true),
            "");
}

TEST(CudaVisibility, RanksSharingANodeWithoutAListTakeTheirGpusOfTheNode) {
  const std::vector<std::string> gpus{"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  for (int r = 0; r < 6; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "6"}}, true,
                         gpus),
              "CUDA_VISIBLE_DEVICES=" + gpus[static_cast<std::size_t>(r) % 4]);
  }
  EXPECT_EQ(visibility({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, true, gpus),
            "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b");
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

TEST(CudaDeviceMayExist, AnEmptyOrNegativeListHidesEveryGpu) {
  EXPECT_FALSE(cuda_device_may_exist(""));
  EXPECT_FALSE(cuda_device_may_exist("-1"));
}

}  // namespace
}  // namespace blockmm::kernels
