// backends/choice.hpp: a team is kept by what it was made for (a typed key: every field counts),
// and a product that failed drops the kept teams unless its failure leaves their backends as they
// were (bad input, an output's failure, memory); a GPU's failure (a CUDA error may leave its
// context unusable for good) drops them, so that the next product makes its team anew. Without a
// GPU, the cpu team stands in for a GPU's: the rule looks at the failure, not at the backend.
#include <gtest/gtest.h>

#include <exception>
#include <new>

#include "backends/choice.hpp"
#include "core/error.hpp"

namespace blockmm::backends {
namespace {

template <typename E>
std::exception_ptr failure(const E& e) {
  return std::make_exception_ptr(e);
}

TEST(KeptTeams, ATeamIsTakenAgainOnlyForTheSameRequest) {
  kernels::CudaStart no_gpu(false);
  KeptTeams kept;
  TeamRequest request;
  request.backend = kernels::BackendKind::cpu;
  request.threads = 2;
  const multiply::Team first = make_team(request, no_gpu, {}, kept);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(make_team(request, no_gpu, {}, kept)[0], first[0]) << "the same request made a new team";
  TeamRequest other = request;
  other.threads = 3;
  EXPECT_NE(make_team(other, no_gpu, {}, kept)[0], first[0]);
  EXPECT_EQ(kept.size(), 2u);
  // Every field tells keys apart, in both directions (a strict weak order).
  const TeamKey key(kernels::BackendKind::cuda, request);
  for (const auto& change : std::vector<void (*)(TeamRequest&)>{
           [](TeamRequest& r) { r.gpus = {1}; }, [](TeamRequest& r) { r.memory_budget = 1; },
           [](TeamRequest& r) { r.workers = 2; }, [](TeamRequest& r) { r.gpu_sharers = 2; },
           [](TeamRequest& r) { r.node_ranks = 2; }, [](TeamRequest& r) { r.reference_whole_inputs = true; },
           [](TeamRequest& r) { r.cuda.dense = kernels::CudaChoices::Dense::never; },
           [](TeamRequest& r) { r.cuda.build = kernels::CudaChoices::Build::host; },
           [](TeamRequest& r) { r.cuda.tensor_core_blocks = false; }}) {
    TeamRequest changed = request;
    change(changed);
    const TeamKey other_key(kernels::BackendKind::cuda, changed);
    EXPECT_TRUE(key < other_key || other_key < key);
  }
  EXPECT_FALSE(key < TeamKey(kernels::BackendKind::cuda, request));
  EXPECT_TRUE(TeamKey(kernels::BackendKind::cpu, request) < key || key < TeamKey(kernels::BackendKind::cpu, request));
}

TEST(KeptTeams, AFailureThatMayHaveBrokenTheTeamDropsIt) {
  kernels::CudaStart no_gpu(false);
  TeamRequest request;
  request.backend = kernels::BackendKind::cpu;
  KeptTeams kept;
  const multiply::Team team = make_team(request, no_gpu, {}, kept);
  // Kept: what was given, an output's failure, memory.
  for (const std::exception_ptr& benign :
       {failure(InputError("A: truncated")), failure(UsageError("BLOCKMM_RELABEL: x")), failure(OutputError("C.bin: full")),
        failure(OutOfMemoryError("each GPU must hold a numeric chunk")), failure(std::bad_alloc()), std::exception_ptr()}) {
    drop_teams_after_failure(kept, benign);
    ASSERT_EQ(kept.size(), 1u);
  }
  EXPECT_EQ(make_team(request, no_gpu, {}, kept)[0], team[0]);
  // Dropped: a device's failure, anything else.
  for (const std::exception_ptr& breaking :
       {failure(ResourceError("CUDA: cudaMemcpyAsync: an illegal memory access was encountered")),
        failure(Error(ExitCode::other, "internal error")), failure(std::runtime_error("?"))}) {
    make_team(request, no_gpu, {}, kept);
    drop_teams_after_failure(kept, breaking);
    EXPECT_TRUE(kept.empty());
  }
  EXPECT_NE(make_team(request, no_gpu, {}, kept)[0], team[0]) << "a dropped team was taken again";
}

}  // namespace
}  // namespace blockmm::backends
