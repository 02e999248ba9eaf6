// A path's folder and last name, as the output files' temporaries and parts are named beside
// their target: "." for a bare name, "/" for a name in the root.
#pragma once

#include <cstddef>
#include <string>

namespace blockmm::io {

inline std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

inline std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace blockmm::io
