#include "backends/choice.hpp"

#include <algorithm>
#include <cstddef>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"

namespace blockmm::backends {

bool cuda_repays(const kernels::WorkEstimate& estimate) {
  return kernels::estimated_macs(estimate) >= kAutoCudaMinMacs || estimate.input_blocks >= kAutoCudaMinInputBlocks;
}

int automatic_gpu_count(std::int32_t n, std::int32_t m, std::int64_t a_blocks, std::int64_t b_blocks) {
  if (n <= 0 || m <= 0) return 0;
  const double order = m, block_rows = static_cast<double>(n) / order;
  const double macs = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / block_rows * order * order * order;
  return macs < kOneGpuBelowMacs ? 1 : 0;
}

kernels::CudaChoices cuda_choices(const settings::CudaOverrides& overrides) {
  kernels::CudaChoices choices;
  if (overrides.dense == settings::Switch::on) choices.dense = kernels::CudaChoices::Dense::always;
  if (overrides.dense == settings::Switch::off) choices.dense = kernels::CudaChoices::Dense::never;
  if (overrides.dense_type == settings::CudaOverrides::DenseType::float64)
    choices.dense_type = kernels::CudaChoices::DenseType::float64;
  if (overrides.dense_type == settings::CudaOverrides::DenseType::byte_planes)
    choices.dense_type = kernels::CudaChoices::DenseType::byte_planes;
  choices.generic_kernel = overrides.generic_kernel;
  if (overrides.tensor_core_blocks == settings::Switch::off) choices.tensor_core_blocks = false;
  if (overrides.tensor_core_blocks == settings::Switch::on) choices.tensor_core_blocks = true;
  if (overrides.build == settings::CudaOverrides::Build::host) choices.build = kernels::CudaChoices::Build::host;
  if (overrides.build == settings::CudaOverrides::Build::device) choices.build = kernels::CudaChoices::Build::device;
  choices.probe_memory = overrides.probe_memory;
  return choices;
}

void start_gpus(kernels::CudaStart& cuda, const std::vector<int>& gpus, std::int64_t input_bytes, int threads,
                const kernels::WorkEstimate& estimate, const kernels::CudaChoices& choices) {
  cuda.start_devices(gpus, input_bytes, threads);
  kernels::WorkEstimate share = estimate;
  if (!gpus.empty()) {
    share.block_products /= static_cast<std::int64_t>(gpus.size());
    share.rows = static_cast<std::int32_t>(share.rows / static_cast<std::int32_t>(gpus.size()));
  }
  cuda.preload_dense_library(share, choices);
}

multiply::Options product_options(const settings::Settings& settings, std::int64_t chunk_bytes, int threads) {
  multiply::Options m;
  m.chunk_bytes = chunk_bytes;
  m.threads = threads;
  m.relabel = settings.relabel == settings::Switch::on    ? partition::RelabelMode::on
              : settings.relabel == settings::Switch::off ? partition::RelabelMode::off
                                                          : partition::RelabelMode::automatic;
  m.share_rows = settings.share_rows == settings::ShareRows::off    ? multiply::RowSharingMode::off
                 : settings.share_rows == settings::ShareRows::on   ? multiply::RowSharingMode::on
                 : settings.share_rows == settings::ShareRows::give ? multiply::RowSharingMode::give_first
                                                                    : multiply::RowSharingMode::automatic;
  m.share_b = settings.share_b;
  m.b_panels = settings.b_panels;
  return m;
}

TeamKey::TeamKey(kernels::BackendKind team_kind, const TeamRequest& request)
    : kind(team_kind),
      threads(request.threads),
      workers(request.workers),
      memory_budget(request.memory_budget),
      gpu_sharers(request.gpu_sharers),
      node_ranks(request.node_ranks),
      gpus(request.gpus),
      dense(request.cuda.dense),
      dense_type(request.cuda.dense_type),
      generic_kernel(request.cuda.generic_kernel),
      tensor_core_blocks(request.cuda.tensor_core_blocks),
      build(request.cuda.build),
      probe_memory(request.cuda.probe_memory),
      symbolic_batch_bytes(request.cuda.symbolic_batch_bytes),
      reference_whole_inputs(request.reference_whole_inputs) {}

bool TeamKey::operator<(const TeamKey& o) const {
  const auto fields = [](const TeamKey& k) {
    return std::tie(k.kind, k.threads, k.workers, k.memory_budget, k.gpu_sharers, k.node_ranks, k.gpus, k.dense,
                    k.dense_type, k.generic_kernel, k.tensor_core_blocks, k.build, k.probe_memory,
                    k.symbolic_batch_bytes, k.reference_whole_inputs);
  };
  return fields(*this) < fields(o);
}

void drop_teams_after_failure(KeptTeams& kept, const std::exception_ptr& error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const OutOfMemoryError&) {
    return;
  } catch (const std::bad_alloc&) {
    return;
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage || e.code() == ExitCode::bad_input || e.code() == ExitCode::output_failure) return;
  } catch (...) {
  }
  kept.clear();
}

multiply::Team make_team(const TeamRequest& request, kernels::CudaStart& cuda, const kernels::WorkEstimate& estimate,
                         KeptTeams& kept) {
  multiply::Team team;
  // Host backends: one, or (a developer setting) several, to run the team's paths without a GPU.
  const int host_workers = std::max(1, request.workers);
  kernels::BackendKind kind = kernels::BackendKind::cpu;
  if (request.backend)
    kind = *request.backend;
  else if (cuda_repays(estimate) && !request.gpus.empty())
    kind = kernels::BackendKind::cuda;
  const TeamKey key(kind, request);
  if (const auto it = kept.find(key); it != kept.end()) {
    for (const std::shared_ptr<kernels::Backend>& backend : it->second) backend->begin_product();
    return it->second;
  }
  if (kind == kernels::BackendKind::reference) {
    for (int w = 0; w < host_workers; ++w) team.push_back(kernels::make_reference_backend({request.reference_whole_inputs}));
    return kept[key] = team;
  }
  if (kind == kernels::BackendKind::cpu) {
    for (int w = 0; w < host_workers; ++w) team.push_back(kernels::make_cpu_backend({request.threads}));
    return kept[key] = team;
  }
  // The user's one line says what to do; the failed CUDA call stays behind --verbose.
  const std::string advice = "; use --backend cpu, or --backend auto to take the GPU only when one is usable";
  if (!BLOCKMM_BACKENDS_WITH_CUDA)
    throw ResourceError("--backend cuda: no usable GPU, this blockmm was built without CUDA" + advice);
  const std::vector<int>& gpus = request.gpus;
  try {
    if (gpus.empty()) throw ResourceError("no CUDA device is visible");
    const int visible = cuda.device_count();
    // One backend a GPU; BLOCKMM_WORKERS may ask for more (backends then share GPUs, and their
    // memory), so that one GPU runs a team's paths too.
    const std::size_t count = request.workers > 0 ? static_cast<std::size_t>(request.workers) : gpus.size();
    const int per_gpu = static_cast<int>((count + gpus.size() - 1) / gpus.size());
    for (std::size_t g = 0; g < count; ++g) {
      kernels::CudaConfig config;
      config.device = gpus[g % gpus.size()];
      config.sharers = per_gpu * (request.gpu_sharers > 0
                                      ? request.gpu_sharers
                                      : std::max(1, (request.node_ranks + visible - 1 - config.device) / std::max(1, visible)));
      config.threads = request.threads;
      config.memory_budget = request.memory_budget;
      config.choices = request.cuda;
      config.estimate = estimate;
      config.estimate.block_products /= static_cast<std::int64_t>(count);
      config.estimate.rows = static_cast<std::int32_t>(config.estimate.rows / static_cast<std::int32_t>(count));
      config.name_note = request.name_note;
      team.push_back(cuda.make_backend(config));
    }
    return kept[key] = team;
  } catch (const OutOfMemoryError&) {
    throw;
  } catch (const Error& e) {
    throw ResourceError("--backend cuda: no usable GPU was found" + advice +
                        (request.verbose ? std::string(" (cause: ") + e.what() + ")" : std::string()));
  }
}

}  // namespace blockmm::backends
