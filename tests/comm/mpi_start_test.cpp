// comm::mpi_start_settings: what blockmm sets before MPI_Init, for environments written out
// here (the end-to-end check under a real mpiexec: Mpi.StartSettingsOnOneNodeYieldToTheUsersOwn).
#include "comm/mpi_start.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace blockmm::comm {
namespace {

std::vector<std::string> settings_for(const std::map<std::string, std::string>& env, bool open_mpi = true) {
  return mpi_start_settings(
      [&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      open_mpi);
}

const std::vector<std::string> kHwloc{"HWLOC_COMPONENTS=-opencl"};
const std::vector<std::string> kOneNode{"HWLOC_COMPONENTS=-opencl", "OMPI_MCA_pml=ob1", "OMPI_MCA_osc=^ucx"};

TEST(MpiStart, OneNodeUnderMpirunGetsSharedMemoryAndHwlocWithoutOpenCl) {
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}), kOneNode);
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}), kOneNode);
}

TEST(MpiStart, SeveralNodesKeepOpenMpisTransports) {
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}), kHwloc);
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "4"}}), kHwloc);  // no local size: not known to be one node
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "x"}}), kHwloc);
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "0"}}), kHwloc);
  EXPECT_EQ(settings_for({}), kHwloc);
}

TEST(MpiStart, SrunStepsOnOneNodeToo) {
  EXPECT_EQ(settings_for({{"SLURM_STEP_NUM_NODES", "1"}, {"PMIX_RANK", "0"}}), kOneNode);
  EXPECT_EQ(settings_for({{"SLURM_STEP_NUM_NODES", "2"}, {"PMIX_RANK", "0"}}), kHwloc);
  // Open MPI's own counts decide where both are there (mpirun inside an allocation).
  EXPECT_EQ(settings_for({{"SLURM_STEP_NUM_NODES", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
            kHwloc);
}

TEST(MpiStart, WhatTheUserSetIsKept) {
  const std::map<std::string, std::string> one_node{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  for (const char* transport : {"OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl"}) {
    SCOPED_TRACE(transport);
    auto env = one_node;
    env[transport] = "ucx";
    EXPECT_EQ(settings_for(env), kHwloc);
  }
  auto env = one_node;
  env["OMPI_MCA_osc"] = "pt2pt";
  EXPECT_EQ(settings_for(env), (std::vector<std::string>{"HWLOC_COMPONENTS=-opencl", "OMPI_MCA_pml=ob1"}));
  env = one_node;
  env["HWLOC_COMPONENTS"] = "-gl";
  EXPECT_EQ(settings_for(env), (std::vector<std::string>{"OMPI_MCA_pml=ob1", "OMPI_MCA_osc=^ucx"}));
  // An empty value is no choice.
  env = one_node;
  env["OMPI_MCA_pml"] = "";
  env["HWLOC_COMPONENTS"] = "";
  EXPECT_EQ(settings_for(env), kOneNode);
}

TEST(MpiStart, OtherMpiLibrariesGetOnlyTheHwlocSetting) {
  EXPECT_EQ(settings_for({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, false), kHwloc);
  EXPECT_EQ(settings_for({{"SLURM_STEP_NUM_NODES", "1"}, {"PMI_RANK", "0"}}, false), kHwloc);
}

}  // namespace
}  // namespace blockmm::comm
