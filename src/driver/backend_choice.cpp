#include "driver/backend_choice.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  return backends::automatic_gpu_count(a->n, a->m, a->k, b->k);
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

multiply::TeamFactory team_factory(const Options& options, kernels::CudaStart& cuda, const comm::Communicator& comm,
                                   int threads, const std::vector<int>& gpus, int gpu_sharers, std::string name_note,
                                   backends::KeptTeams& kept) {
  backends::TeamRequest request;
  request.backend = options.backend;
  request.threads = threads;
  request.memory_budget = options.mem_budget;
  request.workers = options.settings.workers;
  request.reference_whole_inputs = options.settings.reference_whole_inputs;
  request.cuda = cuda_choices(options.settings.cuda);
  request.verbose = options.verbose;
  request.gpus = gpus;
  request.gpu_sharers = gpu_sharers;
  request.node_ranks = comm.node_size();
  request.name_note = std::move(name_note);
  return [request, &cuda, &kept](const kernels::WorkEstimate& estimate) {
    return backends::make_team(request, cuda, estimate, kept);
  };
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
