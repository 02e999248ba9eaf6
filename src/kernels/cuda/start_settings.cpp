// What CUDA starts with, decided before it loads: plain C++, compiled in every build.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cuda_start.hpp"

namespace blockmm::kernels {
namespace {

// A device minor number as the driver writes it, or -1.
int parse_minor(const std::string& text) {
  if (text.empty() || text.size() > 6) return -1;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::vector<std::string> split_list(const char* text) {
  std::vector<std::string> entries;
  std::string entry;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!entry.empty()) entries.push_back(entry);
      entry.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      entry += *c;
    }
  }
  return entries;
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
    if (uuid.rfind("GPU-", 0) != 0 || parse_minor(minor) < 0 || excluded == "Yes") continue;
    // MIG instances of this GPU, if any, are what CUDA enumerates: leave the choice to CUDA.
    for (fs::directory_iterator it(proc_root + "/capabilities/gpu" + minor + "/mig", ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().filename().string().rfind("gi", 0) == 0) return {};
    ec.clear();
    if (::access((dev_root + "/nvidia" + minor).c_str(), R_OK | W_OK) == 0) uuids.push_back(uuid);
  }
  return uuids;
}

std::vector<int> gpu_share(int gpus, const NodePlace& place, int wanted) {
  std::vector<int> share;
  if (gpus <= 0) return share;
  const int ranks = std::max(1, place.local_ranks);
  const int rank = std::clamp(place.local_rank, 0, ranks - 1);
  if (gpus < ranks) {
    share.push_back(rank % gpus);
    return share;
  }
  const int first = static_cast<int>(static_cast<std::int64_t>(rank) * gpus / ranks);
  const int end = static_cast<int>(static_cast<std::int64_t>(rank + 1) * gpus / ranks);
  for (int g = first; g < end && (wanted <= 0 || static_cast<int>(share.size()) < wanted); ++g) share.push_back(g);
  return share;
}

std::string cuda_visibility_setting(const EnvironmentLookup& lookup, const NodePlace& place, int wanted,
                                    const std::vector<std::string>& node_gpus) {
  if (!place.known) return "";  // where the rank sits is known only after MPI_Init
  const char* visible = lookup("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> entries = visible != nullptr ? split_list(visible) : node_gpus;
  if (visible != nullptr && entries.size() <= 1) return "";  // no GPU, or one already: the user's choice stands
  if (entries.empty()) {
    // Nothing to name GPUs by: the first, as CUDA numbers them, for a process alone on its node
    // that wants one.
    return place.local_ranks == 1 && wanted == 1 ? "CUDA_VISIBLE_DEVICES=0" : "";
  }
  const std::vector<int> share = gpu_share(static_cast<int>(entries.size()), place, wanted);
  if (share.size() == entries.size()) return "";  // every GPU there is
  std::string list;
  for (const int g : share) list += (list.empty() ? "" : ",") + entries[static_cast<std::size_t>(g)];
  return "CUDA_VISIBLE_DEVICES=" + list;
}

std::string cuda_connections_setting(const EnvironmentLookup& lookup) {
  const char* set = lookup("CUDA_DEVICE_MAX_CONNECTIONS");
  return set != nullptr && *set != '\0' ? "" : "CUDA_DEVICE_MAX_CONNECTIONS=1";
}

bool cuda_device_may_exist(const char* cuda_visible_devices) {
  const char* visible = cuda_visible_devices;
  if (visible != nullptr && (std::strlen(visible) == 0 || std::strcmp(visible, "-1") == 0)) return false;
  struct stat st {};
  return ::stat("/dev/nvidiactl", &st) == 0 || ::stat("/dev/nvidia0", &st) == 0;
}

}  // namespace blockmm::kernels
