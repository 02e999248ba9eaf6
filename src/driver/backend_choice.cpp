#include "driver/backend_choice.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "comm/launcher.hpp"
#include "comm/mpi_start.hpp"
#include "core/error.hpp"
#include "kernels/cuda/cuda_backend.hpp"

namespace blockmm::driver {

namespace {

// One rank per GPU by node-local rank; with more ranks than GPUs, ranks share them.
// CUDA_VISIBLE_DEVICES (set by Slurm's --gpus-per-task, say) is honoured by the runtime.
int device_for(const comm::Communicator& comm, int devices) { return devices > 0 ? comm.node_rank() % devices : 0; }

// Developer settings for comparisons (bench/): the driver reads them, the backend only sees
// its config. BLOCKMM_CUDA_DENSE=1|0, BLOCKMM_CUDA_DENSE_TYPE=f64|planes, BLOCKMM_CUDA_GENERIC=1,
// BLOCKMM_CUDA_TC=0|1 (block products on tensor cores for m = 8, 16, 32; 1 by default),
// BLOCKMM_CUDA_BUILD=host|device.
kernels::CudaChoices cuda_choices_from_environment() {
  kernels::CudaChoices choices;
  const auto value = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  if (value("BLOCKMM_CUDA_DENSE") == "1") choices.dense = kernels::CudaChoices::Dense::always;
  if (value("BLOCKMM_CUDA_DENSE") == "0") choices.dense = kernels::CudaChoices::Dense::never;
  if (value("BLOCKMM_CUDA_DENSE_TYPE") == "f64") choices.dense_type = kernels::CudaChoices::DenseType::float64;
  if (value("BLOCKMM_CUDA_DENSE_TYPE") == "planes") choices.dense_type = kernels::CudaChoices::DenseType::byte_planes;
  choices.generic_kernel = value("BLOCKMM_CUDA_GENERIC") == "1";
  if (value("BLOCKMM_CUDA_TC") == "0") choices.tensor_core_blocks = false;
  if (value("BLOCKMM_CUDA_TC") == "1") choices.tensor_core_blocks = true;
  if (value("BLOCKMM_CUDA_BUILD") == "host") choices.build = kernels::CudaChoices::Build::host;
  if (value("BLOCKMM_CUDA_BUILD") == "device") choices.build = kernels::CudaChoices::Build::device;
  return choices;
}

// Whether this run will probably use the GPU: --backend cuda, or auto with inputs this large.
bool cuda_likely(const Options& options, std::int64_t input_bytes) {
  return options.backend == "cuda" || (options.backend == "auto" && input_bytes >= kAutoCudaWarmUpInputBytes);
}

std::int64_t input_file_bytes(const Options& options) {
  std::int64_t input_bytes = 0;
  for (const std::string& path : {options.a_path, options.b_path}) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) input_bytes += static_cast<std::int64_t>(st.st_size);
  }
  return input_bytes;
}

std::vector<std::string>& applied_settings() {
  static std::vector<std::string> settings;
  return settings;
}

}  // namespace

std::vector<std::string> node_gpu_uuids(const std::string& proc_root, const std::string& dev_root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> gpus;
  for (fs::directory_iterator it(proc_root + "/gpus", ec), end; !ec && it != end; it.increment(ec)) gpus.push_back(it->path());
  std::sort(gpus.begin(), gpus.end());  // bus order: the directories are named by PCI address
  std::vector<std::string> uuids;
  for (const fs::path& gpu : gpus) {
    std::ifstream information(gpu / "information");
    std::string uuid, minor, excluded;
    for (std::string line; std::getline(information, line);) {
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t\r") + 1);
      const std::string key = line.substr(0, colon);
      if (key == "GPU UUID") uuid = value;
      if (key == "Device Minor") minor = value;
      if (key == "GPU Excluded") excluded = value;
    }
    if (uuid.rfind("GPU-", 0) != 0 || comm::parse_count(minor.c_str()) < 0 || excluded == "Yes") continue;
    // MIG instances of this GPU, if any, are what CUDA enumerates: leave the choice to CUDA.
    for (fs::directory_iterator it(proc_root + "/capabilities/gpu" + minor + "/mig", ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().filename().string().rfind("gi", 0) == 0) return {};
    ec.clear();
    if (::access((dev_root + "/nvidia" + minor).c_str(), R_OK | W_OK) == 0) uuids.push_back(uuid);
  }
  return uuids;
}

std::string cuda_visibility_setting(const comm::EnvironmentLookup& lookup, bool uses_mpi,
                                    const std::vector<std::string>& node_gpus) {
  const char* visible = lookup("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> entries;
  if (visible != nullptr) {
    std::string entry;
    for (const char* c = visible;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!entry.empty()) entries.push_back(entry);
        entry.clear();
        if (*c == '\0') break;
      } else if (*c != ' ') {
        entry += *c;
      }
    }
    if (entries.size() <= 1) return "";  // no GPU, or one already: the user's choice stands
  }
  int local_rank = 0;
  bool alone = true;  // the only rank on this node
  if (uses_mpi) {
    const comm::LauncherPlacement placement = comm::launcher_placement(lookup);
    if (!placement.knows_local_rank()) return "";  // where the rank sits is known only after MPI_Init
    local_rank = placement.local_rank();
    alone = placement.alone_on_node();
  }
  if (visible == nullptr) {
    if (alone) return "CUDA_VISIBLE_DEVICES=0";
    if (node_gpus.size() <= 1) return "";
    return "CUDA_VISIBLE_DEVICES=" + node_gpus[static_cast<std::size_t>(local_rank) % node_gpus.size()];
  }
  return "CUDA_VISIBLE_DEVICES=" + entries[alone ? 0 : static_cast<std::size_t>(local_rank) % entries.size()];
}

std::string cuda_connections_setting(const comm::EnvironmentLookup& lookup) {
  const char* set = lookup("CUDA_DEVICE_MAX_CONNECTIONS");
  return set != nullptr && *set != '\0' ? "" : "CUDA_DEVICE_MAX_CONNECTIONS=1";
}

std::vector<std::string> apply_cuda_start_settings(const Options& options, bool uses_mpi) {
  if (!cuda_likely(options, input_file_bytes(options))) return {};
  const comm::EnvironmentLookup environment = [](const char* name) -> const char* { return std::getenv(name); };
  // The driver's files cost microseconds to read; cuda_visibility_setting uses them only for
  // ranks sharing a node without a list.
  std::vector<std::string> settings;
  for (const std::string& setting :
       {cuda_visibility_setting(environment, uses_mpi, uses_mpi ? node_gpu_uuids() : std::vector<std::string>{}),
        cuda_connections_setting(environment)})
    if (!setting.empty()) settings.push_back(setting);
  comm::set_environment(settings);
  applied_settings() = settings;
  return settings;
}

const std::vector<std::string>& applied_cuda_start_settings() { return applied_settings(); }

std::string applied_cuda_visibility() {
  for (const std::string& setting : applied_settings())
    if (setting.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) return setting;
  return "";
}

std::shared_future<void> start_cuda_driver_load(const Options& options) {
  if (!cuda_likely(options, input_file_bytes(options))) return {};
  return std::async(std::launch::async, [] {
           try {
             (void)kernels::cuda_device_available();  // no device nodes: returns at once, loads nothing
           } catch (...) {  // choose_backend says what is wrong, or picks the CPU
           }
         }).share();
}

std::shared_future<void> start_cuda_warm_up(const Options& options, const comm::Communicator& comm,
                                            std::int64_t input_bytes, int threads) {
  if (!cuda_likely(options, input_bytes)) return {};
  // Even asking for the device count loads the driver (about 0.1 s): all of it off this thread.
  // Failures stay silent here; choose_backend says what is wrong, or picks the CPU.
  // (The future is waited for, or destroyed, inside run_product: `comm` outlives it.)
  return std::async(std::launch::async, [&comm, input_bytes, threads] {
           try {
             if (!kernels::cuda_device_available()) return;
             kernels::warm_up_cuda(device_for(comm, kernels::cuda_device_count()), input_bytes, threads);
           } catch (const Error&) {
           }
         }).share();
}

std::future<void> start_dense_library_load(const Options& options, std::int64_t input_bytes,
                                           const kernels::BackendConfig::WorkEstimate& estimate) {
  if (!cuda_likely(options, input_bytes) || !kernels::cuda_device_may_exist()) return {};
  return std::async(std::launch::async, [estimate, choices = cuda_choices_from_environment()] {
    kernels::preload_dense_library(estimate, choices);
  });
}

kernels::BackendConfig::WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks,
                                                         int ranks) {
  kernels::BackendConfig::WorkEstimate estimate;
  estimate.n = shape.n;
  estimate.m = shape.m;
  const std::int32_t p = std::max(1, shape.block_rows());
  const int share = std::max(1, ranks);
  estimate.rows = static_cast<std::int32_t>((std::int64_t{p} + share - 1) / share);
  const double products = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / p / share;
  estimate.block_products = products >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(products);
  estimate.input_blocks = (a_blocks + b_blocks) / share;
  return estimate;
}

std::int64_t estimated_macs(const kernels::BackendConfig::WorkEstimate& estimate) {
  const double m = estimate.m;
  const double macs = static_cast<double>(estimate.block_products) * m * m * m;
  return macs >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(macs);
}

std::unique_ptr<kernels::Backend> choose_backend(const Options& options, const comm::Communicator& comm, int threads,
                                                 const kernels::BackendConfig::WorkEstimate& estimate,
                                                 int gpu_sharers) {
  kernels::BackendKind kind = kernels::BackendKind::cpu;
  if (options.backend == "auto") {
    const bool repays = estimated_macs(estimate) >= kAutoCudaMinMacs || estimate.input_blocks >= kAutoCudaMinInputBlocks;
    if (repays && kernels::cuda_device_available()) kind = kernels::BackendKind::cuda;
  } else {
    kind = kernels::parse_backend_kind(options.backend);
  }
  kernels::BackendConfig config;
  config.threads = threads;
  config.device_memory_budget = options.mem_budget;
  // Developer setting for tests: BLOCKMM_WHOLE_INPUTS=1 (the reference backend only).
  const char* whole_inputs = std::getenv("BLOCKMM_WHOLE_INPUTS");
  config.reference_whole_inputs = whole_inputs != nullptr && std::string(whole_inputs) == "1";
  config.estimate = estimate;
  if (kind != kernels::BackendKind::cuda) {
    kernels::release_cuda_warm_up();  // staging pinned beside the context, for nothing
    return kernels::make_backend(kind, config);
  }
  // The user's one line says what to do; the failed CUDA call stays behind --verbose.
  const std::string advice = "; use --backend cpu, or --backend auto to take the GPU only when one is usable";
  if (!BLOCKMM_BUILD_CUDA) throw ResourceError("--backend cuda: no usable GPU, this blockmm was built without CUDA" + advice);
  try {
    const int devices = kernels::cuda_device_count();
    if (devices <= 0) throw ResourceError("no CUDA device is visible");
    config.device = device_for(comm, devices);
    config.device_sharers =
        gpu_sharers > 0 ? gpu_sharers : (comm.node_size() + devices - 1 - config.device) / devices;
    config.cuda = cuda_choices_from_environment();
    return kernels::make_backend(kind, config);
  } catch (const Error& e) {
    if (e.code() == ExitCode::resource && std::string(e.what()).find("out of memory") != std::string::npos) throw;
    throw ResourceError("--backend cuda: no usable GPU was found" + advice +
                        (options.verbose ? std::string(" (cause: ") + e.what() + ")" : std::string()));
  }
}

int count_equal_keys(const std::vector<std::int64_t>& keys, int rank) {
  if (std::find(keys.begin(), keys.end(), std::int64_t{0}) != keys.end()) return 0;
  return static_cast<int>(std::count(keys.begin(), keys.end(), keys.at(static_cast<std::size_t>(rank))));
}

int count_gpu_sharers(const comm::Communicator& comm) {
  if (comm.size() == 1) return 1;
  std::int64_t key = 0;
  try {
    const int devices = kernels::cuda_device_count();
    const std::string uuid = devices > 0 ? kernels::cuda_device_uuid(device_for(comm, devices)) : "";
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
