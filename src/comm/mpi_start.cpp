#include "comm/mpi_start.hpp"

#include <mpi.h>

#include <cstdlib>

#include "comm/launcher.hpp"

namespace blockmm::comm {
namespace {

std::vector<std::string>& applied() {
  static std::vector<std::string> settings;
  return settings;
}

}  // namespace

std::vector<std::string> mpi_start_settings(const EnvironmentLookup& lookup, bool open_mpi) {
  const auto is_set = [&](const char* name) {
    const char* v = lookup(name);
    return v != nullptr && *v != '\0';
  };
  std::vector<std::string> settings;
  if (!is_set("HWLOC_COMPONENTS")) settings.emplace_back("HWLOC_COMPONENTS=-opencl");
  if (!open_mpi) return settings;
  const bool one_node = launcher_placement(lookup).on_one_node();
  if (!one_node || is_set("OMPI_MCA_pml") || is_set("OMPI_MCA_btl") || is_set("OMPI_MCA_mtl")) return settings;
  settings.emplace_back("OMPI_MCA_pml=ob1");
  if (!is_set("OMPI_MCA_osc")) settings.emplace_back("OMPI_MCA_osc=^ucx");
  return settings;
}

std::vector<std::string> apply_mpi_start_settings(bool mpi_will_start, const EnvironmentLookup& lookup) {
  if (!mpi_will_start) return {};
#if defined(OPEN_MPI)
  constexpr bool open_mpi = true;
#else
  constexpr bool open_mpi = false;
#endif
  std::vector<std::string> settings =
      mpi_start_settings(lookup, open_mpi);
  set_environment(settings);
  applied() = settings;
  return settings;
}

const std::vector<std::string>& applied_mpi_start_settings() { return applied(); }

void set_environment(const std::vector<std::string>& settings) {
  for (const std::string& s : settings) {
    const std::size_t eq = s.find('=');
    ::setenv(s.substr(0, eq).c_str(), s.substr(eq + 1).c_str(), 1);
  }
}

}  // namespace blockmm::comm
