#include "python/in_process.hpp"

#include <omp.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "backends/choice.hpp"
#include "comm/communicator.hpp"
#include "kernels/cuda_start.hpp"
#include "multiply/multiply.hpp"
#include "settings/settings.hpp"

namespace blockmm::python {
namespace {

// The product's phases and chunks, where it may stop: each checks the cancellation.
class CancellingObserver final : public multiply::Observer {
 public:
  explicit CancellingObserver(Cancellation cancellation) : cancellation_(cancellation) {}
  void phase_started(multiply::Phase /*phase*/) override { cancellation_.check(); }
  void tiles_done(std::int64_t /*done*/) override { cancellation_.check(); }

 private:
  Cancellation cancellation_;
};

// What the process keeps from one product to the next: CUDA's start and the GPUs' teams (their
// contexts, staging and cuBLAS), as a batch of the driver keeps them. Never destroyed: at the
// interpreter's exit the kernel releases the devices, and a CUDA context torn down from a static
// destructor races the runtime's own teardown.
struct ProcessState {
  std::mutex one_product_at_a_time;
  std::unique_ptr<kernels::CudaStart> cuda;  // made by the first product that may take a GPU
  kernels::CudaStart no_gpu{false};          // before that
  backends::KeptTeams teams;
};
ProcessState& process_state() {
  static ProcessState* const state = new ProcessState;
  return *state;
}

// Restores the calling thread's OpenMP thread count, which the cpu backend sets.
class OmpThreadsKept {
 public:
  OmpThreadsKept() : threads_(omp_get_max_threads()) {}
  ~OmpThreadsKept() { omp_set_num_threads(threads_); }
  OmpThreadsKept(const OmpThreadsKept&) = delete;
  OmpThreadsKept& operator=(const OmpThreadsKept&) = delete;

 private:
  int threads_;
};

// CUDA's start, made by the first product (or question) that may take a GPU.
kernels::CudaStart& process_cuda(ProcessState& state, const settings::Lookup& environment) {
  if (!state.cuda)
    state.cuda = std::make_unique<kernels::CudaStart>(kernels::cuda_device_may_exist(environment("CUDA_VISIBLE_DEVICES")));
  return *state.cuda;
}

}  // namespace

int visible_gpus() {
  ProcessState& state = process_state();
  const std::lock_guard<std::mutex> hold(state.one_product_at_a_time);
  return process_cuda(state, settings::process_environment()).device_count();
}

multiply::Report multiply_arrays(ArrayInputFile& a, ArrayInputFile& b, const ProductRequest& request,
                                 const AllocateOutput& allocate, const Cancellation& cancellation) {
  ProcessState& state = process_state();
  const std::lock_guard<std::mutex> hold(state.one_product_at_a_time);
  const OmpThreadsKept omp_threads;
  const settings::Lookup environment = settings::process_environment();
  const settings::Settings settings = settings::Settings::read(environment);
  io::check_same_shape(a, b);
  comm::CommunicatorOptions comm_options;
  comm_options.mode = comm::MpiMode::off;  // one rank; MPI is never initialised in process
  const comm::Communicator comm(comm_options);

  backends::TeamRequest team;
  team.backend = request.backend;
  team.threads = request.threads > 0 ? request.threads : omp_get_max_threads();
  team.memory_budget = request.memory_budget;
  team.workers = settings.workers;
  team.reference_whole_inputs = settings.reference_whole_inputs;
  team.cuda = backends::cuda_choices(settings.cuda);
  const MatrixShape shape = a.header().shape();
  const kernels::WorkEstimate estimate = kernels::estimated_rank_work(shape, a.header().k, b.header().k, 1);
  // CUDA starts only where the GPU may be taken: asked for, or "auto" with work that repays it.
  const bool gpu_wanted = request.backend ? *request.backend == kernels::BackendKind::cuda : backends::cuda_repays(estimate);
  if (gpu_wanted) {
    kernels::CudaStart& cuda = process_cuda(state, environment);
    const int wanted = request.gpus > 0 ? request.gpus
                                        : backends::automatic_gpu_count(shape.n, shape.m, a.header().k, b.header().k);
    team.gpus = kernels::gpu_share(cuda.device_count(), {}, wanted);
    backends::start_gpus(cuda, team.gpus, (a.header().k + b.header().k) * record_bytes<std::uint16_t>(shape.m),
                         team.threads, estimate, team.cuda);
  }
  kernels::CudaStart& cuda = state.cuda ? *state.cuda : state.no_gpu;
  const multiply::TeamFactory factory = [&](const kernels::WorkEstimate& work) {
    return backends::make_team(team, cuda, work, state.teams);
  };
  // GPU teams are kept for the next product; host teams go with this one (their chunk buffers).
  struct DropHostTeams {
    backends::KeptTeams& teams;
    ~DropHostTeams() {
      for (auto it = teams.begin(); it != teams.end();)
        it = !it->second.empty() && it->second[0]->traits().device ? std::next(it) : teams.erase(it);
    }
  } drop_host_teams{state.teams};

  // Threads that allocate the output's pages beside the compute: a few where there are cores to
  // spare (a GPU's host threads mostly wait), one on a small machine.
  ArrayProductWriter writer(allocate, cancellation, std::clamp(team.threads / 4, 1, 4));
  CancellingObserver observer(cancellation);
  try {
    multiply::Report report = multiply::multiply(a, b, factory, writer, comm,
                                                 backends::product_options(settings, request.chunk_bytes, team.threads),
                                                 observer);
    writer.finish();
    return report;
  } catch (...) {
    // A cancelled product stopped between chunks: its GPUs' team is as good as before.
    if (!cancellation.requested()) backends::drop_teams_after_failure(state.teams, std::current_exception());
    throw;
  }
}

Failure describe_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const OutOfMemoryError& e) {
    return {FailureKind::memory, e.what()};
  } catch (const Error& e) {
    const bool given = e.code() == ExitCode::usage || e.code() == ExitCode::bad_input;
    return {given ? FailureKind::value : FailureKind::runtime, e.what()};
  } catch (const std::bad_alloc&) {
    return {FailureKind::memory, "out of memory"};
  } catch (const std::system_error& e) {
    const bool memory = e.code() == std::errc::not_enough_memory;
    return {memory ? FailureKind::memory : FailureKind::runtime, e.what()};
  } catch (const std::exception& e) {
    return {FailureKind::runtime, e.what()};
  } catch (...) {
    return {FailureKind::runtime, "internal error: an exception of unknown type"};
  }
}

}  // namespace blockmm::python
