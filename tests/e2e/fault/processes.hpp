// The live processes of a test's job, found by a tag in their environment: the fault tests
// kill one rank of an mpirun job and then wait for every process of it to be gone.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace blockmm::e2e {

inline std::string read_proc_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Pids of live processes whose environment holds `tag` (and `rank_var` when given: one rank).
// A rank's cleanup watcher inherits its environment; it is not the rank, so a search for a
// rank leaves it out, while a search for the whole job (no rank_var) counts it.
inline std::vector<pid_t> tagged_processes(const std::string& tag, const std::string& rank_var = "") {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (const dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    const std::string dir = "/proc/" + std::string(e->d_name);
    const std::string env = read_proc_file(dir + "/environ");
    bool has_tag = false, has_rank = rank_var.empty();
    for (std::size_t at = 0; at < env.size();) {
      const std::size_t end = env.find('\0', at);
      const std::string var = env.substr(at, end == std::string::npos ? std::string::npos : end - at);
      has_tag |= var == tag;
      has_rank |= var == rank_var;
      if (end == std::string::npos) break;
      at = end + 1;
    }
    const bool watcher = read_proc_file(dir + "/comm") == "blockmm-cleanup\n";
    if (has_tag && has_rank && (rank_var.empty() || !watcher)) pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

}  // namespace blockmm::e2e
