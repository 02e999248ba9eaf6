#include "driver/backend_choice.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build_info.hpp"
#include "comm/mpi_start.hpp"
#include "core/error.hpp"
#include "io/binary_format.hpp"

namespace blockmm::driver {

std::int64_t input_file_bytes(const Options& options) {
  std::int64_t input_bytes = 0;
  for (const std::string& path : {options.a_path, options.b_path}) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) input_bytes += static_cast<std::int64_t>(st.st_size);
  }
  return input_bytes;
}

int automatic_gpu_count(const Options& options) {
  if (options.gpus_given) return options.gpus;
  const std::optional<FileHeader> a = io::peek_binary_header(options.a_path), b = io::peek_binary_header(options.b_path);
  if (!a || !b || a->n != b->n || a->m != b->m) return 0;
  const double m = a->m, block_rows = static_cast<double>(a->n) / m;
  const double macs = static_cast<double>(a->k) * static_cast<double>(b->k) / block_rows * m * m * m;
  return macs < kOneGpuBelowMacs ? 1 : 0;
}

bool cuda_likely(const Options& options, std::int64_t input_bytes) {
  if (options.backend) return *options.backend == kernels::BackendKind::cuda;
  return input_bytes >= kAutoCudaWarmUpInputBytes;
}

std::vector<std::string> apply_cuda_start_settings(const Options& options, const comm::LauncherPlacement& placement,
                                                   bool uses_mpi, const settings::Lookup& environment) {
  kernels::NodePlace place;
  if (uses_mpi) {
    place.known = placement.knows_local_rank() && placement.local_size() > 0;
    place.local_rank = place.known ? placement.local_rank() : 0;
    place.local_ranks = place.known ? placement.local_size() : 1;
  }
  // The driver's files cost microseconds to read.
  std::vector<std::string> settings;
  for (const std::string& setting :
       {kernels::cuda_visibility_setting(environment, place, options.gpus, kernels::node_gpu_uuids()),
        kernels::cuda_connections_setting(environment)})
    if (!setting.empty()) settings.push_back(setting);
  comm::set_environment(settings);
  return settings;
}

std::vector<int> rank_gpus(int visible, const comm::Communicator& comm, bool narrowed, int wanted) {
  if (visible <= 0) return {};
  kernels::NodePlace place;
  if (!narrowed) {
    place.local_rank = comm.node_rank();
    place.local_ranks = comm.node_size();
  }
  return kernels::gpu_share(visible, place, wanted);
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
  return choices;
}

multiply::TeamFactory team_factory(const Options& options, kernels::CudaStart& cuda, const comm::Communicator& comm,
                                   int threads, const std::vector<int>& gpus, int gpu_sharers, std::string name_note,
                                   std::map<std::string, multiply::Team>& kept) {
  return [&options, &cuda, &comm, threads, gpus, gpu_sharers, name_note, &kept](const kernels::WorkEstimate& estimate) {
    multiply::Team team = make_team(options, cuda, comm, threads, gpus, gpu_sharers, name_note, estimate, kept);
    return team;
  };
}

namespace {

// What a team was made for: a later product with the same takes it again.
std::string team_key(kernels::BackendKind kind, const Options& options, int threads, const std::vector<int>& gpus,
                     int gpu_sharers) {
  std::string key = kernels::to_string(kind) + " threads " + std::to_string(threads) + " workers " +
                    std::to_string(options.settings.workers) + " budget " + std::to_string(options.mem_budget) +
                    " sharers " + std::to_string(gpu_sharers) + " gpus";
  for (const int g : gpus) key += " " + std::to_string(g);
  const kernels::CudaChoices c = cuda_choices(options.settings.cuda);
  key += " choices " + std::to_string(static_cast<int>(c.dense)) + std::to_string(static_cast<int>(c.dense_type)) +
         std::to_string(c.generic_kernel) + std::to_string(static_cast<int>(c.build)) + std::to_string(c.tensor_core_blocks);
  key += options.settings.reference_whole_inputs ? " whole" : "";
  return key;
}

}  // namespace

multiply::Team make_team(const Options& options, kernels::CudaStart& cuda, const comm::Communicator& comm, int threads,
                         const std::vector<int>& gpus, int gpu_sharers, const std::string& name_note,
                         const kernels::WorkEstimate& estimate, std::map<std::string, multiply::Team>& kept) {
  multiply::Team team;
  // Host backends: one, or (a developer setting) several, to run the team's paths without a GPU.
  const int host_workers = std::max(1, options.settings.workers);
  kernels::BackendKind kind = kernels::BackendKind::cpu;
  if (options.backend) {
    kind = *options.backend;
  } else {
    const bool repays = multiply::estimated_macs(estimate) >= kAutoCudaMinMacs ||
                        estimate.input_blocks >= kAutoCudaMinInputBlocks;
    if (repays && !gpus.empty()) kind = kernels::BackendKind::cuda;
  }
  const std::string key = team_key(kind, options, threads, gpus, gpu_sharers);
  if (const auto it = kept.find(key); it != kept.end()) {
    for (const std::shared_ptr<kernels::Backend>& backend : it->second) backend->begin_product();
    return it->second;
  }
  if (kind == kernels::BackendKind::reference) {
    for (int w = 0; w < host_workers; ++w)
      team.push_back(kernels::make_reference_backend({options.settings.reference_whole_inputs}));
    return kept[key] = team;
  }
  if (kind == kernels::BackendKind::cpu) {
    for (int w = 0; w < host_workers; ++w) team.push_back(kernels::make_cpu_backend({threads}));
    return kept[key] = team;
  }
  // The user's one line says what to do; the failed CUDA call stays behind --verbose.
  const std::string advice = "; use --backend cpu, or --backend auto to take the GPU only when one is usable";
  if (!BLOCKMM_BUILD_CUDA) throw ResourceError("--backend cuda: no usable GPU, this blockmm was built without CUDA" + advice);
  try {
    if (gpus.empty()) throw ResourceError("no CUDA device is visible");
    const int visible = cuda.device_count();
    // One backend a GPU; BLOCKMM_WORKERS may ask for more (backends then share GPUs, and their
    // memory), so that one GPU runs a team's paths too.
    const std::size_t count = options.settings.workers > 0 ? static_cast<std::size_t>(options.settings.workers) : gpus.size();
    const int per_gpu = static_cast<int>((count + gpus.size() - 1) / gpus.size());
    for (std::size_t g = 0; g < count; ++g) {
      kernels::CudaConfig config;
      config.device = gpus[g % gpus.size()];
      config.sharers = per_gpu * (gpu_sharers > 0 ? gpu_sharers
                                                  : std::max(1, (comm.node_size() + visible - 1 - config.device) /
                                                                    std::max(1, visible)));
      config.threads = threads;
      config.memory_budget = options.mem_budget;
      config.choices = cuda_choices(options.settings.cuda);
      config.estimate = estimate;
      config.estimate.block_products /= static_cast<std::int64_t>(count);
      config.estimate.rows = static_cast<std::int32_t>(config.estimate.rows / static_cast<std::int32_t>(count));
      config.name_note = name_note;
      team.push_back(cuda.make_backend(config));
    }
    return kept[key] = team;
  } catch (const OutOfMemoryError&) {
    throw;
  } catch (const Error& e) {
    throw ResourceError("--backend cuda: no usable GPU was found" + advice +
                        (options.verbose ? std::string(" (cause: ") + e.what() + ")" : std::string()));
  }
}

int count_equal_keys(const std::vector<std::int64_t>& keys, int rank) {
  if (std::find(keys.begin(), keys.end(), std::int64_t{0}) != keys.end()) return 0;
  return static_cast<int>(std::count(keys.begin(), keys.end(), keys.at(static_cast<std::size_t>(rank))));
}

int count_gpu_sharers(kernels::CudaStart& cuda, int device, const comm::Communicator& comm) {
  if (comm.size() == 1) return 1;
  std::int64_t key = 0;
  try {
    const std::string uuid = device >= 0 ? cuda.device_uuid(device) : "";
    char host[256] = {};
    if (!uuid.empty() && ::gethostname(host, sizeof host - 1) == 0) {
      // FNV-1a of "host/uuid"; 0 is kept for "unknown".
      std::uint64_t hash = 14695981039346656037ull;
      for (const char c : std::string(host) + "/" + uuid) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      key = static_cast<std::int64_t>(hash | 1);
    }
  } catch (...) {  // unknown: the caller counts by node-local rank
  }
  return count_equal_keys(comm.gather_all(key), comm.rank());
}

}  // namespace blockmm::driver
