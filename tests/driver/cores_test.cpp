// driver/cores.hpp's plan: the rank's share of its node, an explicit thread count as given,
// a user's binding kept (one thread a bound core), and only Open MPI's unasked-for binding widened.
#include <gtest/gtest.h>

#include "driver/cores.hpp"

namespace blockmm::driver {
namespace {

CoreFacts node(int cores, int rank, int ranks, int bound) {
  CoreFacts f;
  f.node_cores = cores;
  f.node_rank = rank;
  f.node_size = ranks;
  f.bound_cores = bound;
  return f;
}

TEST(CorePlan, UnboundRanksTakeTheirShareOfTheNode) {
  EXPECT_EQ(plan_cores(node(32, 0, 1, 32)).threads, 32);
  EXPECT_EQ(plan_cores(node(32, 1, 2, 32)).threads, 16);
  EXPECT_EQ(plan_cores(node(2, 0, 4, 2)).threads, 1);  // more ranks than cores: one thread each
  EXPECT_TRUE(plan_cores(node(32, 0, 2, 32)).note.empty());
  EXPECT_EQ(plan_cores(node(32, 0, 2, 32)).widen_count, 0);
}

TEST(CorePlan, TheUsersBindingIsKept) {
  // taskset, srun --cpu-bind, mpirun --bind-to core: the threads follow the bound cores.
  const CorePlan plan = plan_cores(node(32, 0, 1, 4));
  EXPECT_EQ(plan.threads, 4);
  EXPECT_EQ(plan.widen_count, 0);
  EXPECT_TRUE(plan.note.empty());
}

TEST(CorePlan, OpenMpisDefaultBindingIsWidenedToTheShare) {
  CoreFacts f = node(32, 1, 2, 1);
  f.launcher_default_binding = true;
  const CorePlan plan = plan_cores(f);
  EXPECT_EQ(plan.threads, 16);
  EXPECT_EQ(plan.widen_first, 16);  // rank 1 of 2: the node's second half
  EXPECT_EQ(plan.widen_count, 16);
  EXPECT_NE(plan.note.find("--bind-to none"), std::string::npos) << plan.note;
  // A default binding that already covers the share is left alone.
  f.bound_cores = 16;
  EXPECT_EQ(plan_cores(f).widen_count, 0);
}

TEST(CorePlan, ExplicitThreadCountsWinAndOversubscriptionIsNamed) {
  CoreFacts f = node(32, 0, 1, 2);
  f.requested_threads = 8;
  const CorePlan plan = plan_cores(f);
  EXPECT_EQ(plan.threads, 8);
  EXPECT_EQ(plan.widen_count, 0);
  EXPECT_NE(plan.note.find("8 threads share the 2 core(s)"), std::string::npos) << plan.note;
  CoreFacts omp = node(32, 0, 1, 32);
  omp.omp_num_threads = 3;
  EXPECT_EQ(plan_cores(omp).threads, 3);
  EXPECT_TRUE(plan_cores(omp).note.empty());
}

}  // namespace
}  // namespace blockmm::driver
