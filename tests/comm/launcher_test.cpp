// comm::launcher_placement: where each launcher's variables put a rank, for environments written
// out here (what mpi_start and the CUDA visibility decide from it: mpi_start_test.cpp,
// backend_choice_test.cpp; under a real mpiexec: tests/e2e/mpi).
#include "comm/launcher.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace blockmm::comm {
namespace {

LauncherPlacement placement(const std::map<std::string, std::string>& env) {
  return launcher_placement([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LauncherPlacement, APlainRunIsNoRankAndKnowsNothing) {
  const LauncherPlacement p = placement({});
  EXPECT_FALSE(p.launched);
  EXPECT_EQ(p.rank, -1);
  EXPECT_FALSE(p.on_one_node());
  EXPECT_FALSE(p.knows_local_rank());
  EXPECT_FALSE(p.alone_on_node());
  // A Slurm batch script's own shell (one task) is no parallel job either.
  EXPECT_FALSE(placement({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}).launched);
}

TEST(LauncherPlacement, OpenMpisMpirunOnOneNodeAndOnTwo) {
  const LauncherPlacement one = placement({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_TRUE(one.launched);
  EXPECT_EQ(one.rank, 2);
  EXPECT_TRUE(one.on_one_node());
  EXPECT_EQ(one.local_rank(), 2);
  EXPECT_FALSE(one.alone_on_node());
  const LauncherPlacement two = placement({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_FALSE(two.on_one_node());
  EXPECT_EQ(two.local_rank(), 1);
  const LauncherPlacement alone = placement({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
  EXPECT_FALSE(alone.on_one_node());
  EXPECT_TRUE(alone.alone_on_node());
  // mpirun inside a Slurm allocation: Open MPI's counts decide, not the allocation's.
  const LauncherPlacement inside = placement({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"SLURM_STEP_NUM_NODES", "1"},
                                              {"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_FALSE(inside.on_one_node());
  EXPECT_FALSE(inside.alone_on_node());
}

TEST(LauncherPlacement, SrunStepsSayTheNodeAndTheLocalId) {
  const LauncherPlacement shared = placement({{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_STEP_NUM_NODES", "2"},
                                              {"SLURM_LOCALID", "3"}, {"SLURM_PROCID", "7"}, {"PMIX_RANK", "7"}});
  EXPECT_TRUE(shared.launched);
  EXPECT_EQ(shared.rank, 7);
  EXPECT_FALSE(shared.on_one_node());
  EXPECT_EQ(shared.local_rank(), 3);
  EXPECT_FALSE(shared.alone_on_node());
  const LauncherPlacement one = placement({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_NUM_NODES", "1"},
                                           {"SLURM_LOCALID", "1"}});
  EXPECT_TRUE(one.on_one_node());
  const LauncherPlacement a_task_a_node = placement({{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "4"},
                                                     {"SLURM_LOCALID", "0"}});
  EXPECT_TRUE(a_task_a_node.alone_on_node());
}

TEST(LauncherPlacement, OtherLaunchersAndGarbledValues) {
  // MPICH's Hydra, Intel MPI, MVAPICH: a rank, but not where it sits.
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"}) {
    SCOPED_TRACE(name);
    const LauncherPlacement p = placement({{name, "1"}});
    EXPECT_TRUE(p.launched);
    EXPECT_FALSE(p.knows_local_rank());
    EXPECT_FALSE(p.on_one_node());
  }
  // Not counts: not said. Empty: not set.
  const LauncherPlacement garbled = placement({{"OMPI_COMM_WORLD_SIZE", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "x"},
                                               {"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}, {"OMPI_COMM_WORLD_RANK", "1x"}});
  EXPECT_TRUE(garbled.launched);  // the launcher's variable is there
  EXPECT_EQ(garbled.rank, -1);
  EXPECT_FALSE(garbled.on_one_node());
  EXPECT_FALSE(garbled.knows_local_rank());
  const LauncherPlacement empty = placement({{"OMPI_COMM_WORLD_SIZE", ""}, {"PMIX_RANK", ""}, {"SLURM_PROCID", "5"}});
  EXPECT_FALSE(empty.launched);
  EXPECT_EQ(empty.rank, 5);
}

}  // namespace
}  // namespace blockmm::comm
