// Outputs against the files a run reads, and against each other (same_file.hpp).
#include "io/same_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "core/error.hpp"
#include "io/output_parts.hpp"
#include "io/path_names.hpp"

namespace blockmm::io {
namespace {

// Identity of a path for same-file checks: the file it names (links followed) when it exists,
// else its directory's identity and last name.
struct PathKey {
  bool exists = false;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::string name;
  bool operator==(const PathKey& o) const {
    return exists == o.exists && device == o.device && inode == o.inode && name == o.name;
  }
};

PathKey key_of(const std::string& path) {
  PathKey key;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    key.exists = true;
  } else if (::stat(directory_of(path).c_str(), &st) == 0) {
    key.name = base_name(path);
  } else {
    key.name = path;  // unreachable directory: compare the spelling; the run reports it
    return key;
  }
  key.device = static_cast<std::uint64_t>(st.st_dev);
  key.inode = static_cast<std::uint64_t>(st.st_ino);
  return key;
}

}  // namespace

InputMatch input_written_by(const std::string& output, const std::vector<std::string>& inputs) {
  struct stat st {};
  if (::stat(output.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) return {inputs.size(), ""};  // written in place
  const PathKey out = key_of(output);
  if (!out.exists) return {inputs.size(), ""};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (key_of(inputs[i]) == out) return {i, ""};
    // A parted input's reader opens the parts its user block names, beside the name given (only
    // a regular file is opened to read that: never a device or a FIFO).
    if (::stat(inputs[i].c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    for (const std::string& part : parts_of_existing_output(inputs[i], true))
      if (key_of(directory_of(inputs[i]) + "/" + part) == out) return {i, part};
  }
  return {inputs.size(), ""};
}

void check_not_an_input(const std::string& output, const std::string& what, const std::vector<std::string>& inputs) {
  const InputMatch match = input_written_by(output, inputs);
  if (match.input >= inputs.size()) return;
  const std::string& input = inputs[match.input];
  throw UsageError(output + ": the " + what + " is " +
                   (match.part.empty() ? "the input " + input + " (the same file)"
                                       : "the part file " + match.part + " of the parted input " + input) +
                   "; blockmm never writes over its inputs");
}

void check_distinct_outputs(const std::string& first, const std::string& second, const std::string& second_what) {
  struct stat st {};
  const bool device = ::stat(first.c_str(), &st) == 0 && S_ISCHR(st.st_mode);  // /dev/null twice: written in place
  if (!device && key_of(first) == key_of(second))
    throw UsageError(second + ": the " + second_what + " is the output " + first + " (the same file)");
}

std::pair<std::size_t, std::size_t> first_repeated_output(const std::vector<std::string>& paths) {
  std::map<std::tuple<bool, std::uint64_t, std::uint64_t, std::string>, std::size_t> seen;
  for (std::size_t p = 0; p < paths.size(); ++p) {
    struct stat st {};
    if (::stat(paths[p].c_str(), &st) == 0 && S_ISCHR(st.st_mode)) continue;  // /dev/null: written in place
    const PathKey key = key_of(paths[p]);
    const auto [at, fresh] = seen.emplace(std::make_tuple(key.exists, key.device, key.inode, key.name), p);
    if (!fresh) return {at->second, p};
  }
  return {paths.size(), paths.size()};
}

std::string descriptor_link(const std::string& path) {
  std::string hop = path;
  struct stat st {};
  for (int hops = 0; hops < 40 && ::lstat(hop.c_str(), &st) == 0 && S_ISLNK(st.st_mode); ++hops) {
    std::string link(PATH_MAX, '\0');
    const ssize_t length = ::readlink(hop.c_str(), link.data(), link.size());
    if (length <= 0) break;
    link.resize(static_cast<std::size_t>(length));
    const std::string next = link.front() == '/' ? link : directory_of(hop) + "/" + link;
    char* resolved = ::realpath(directory_of(next).c_str(), nullptr);
    const bool in_proc = resolved != nullptr && std::strncmp(resolved, "/proc/", 6) == 0;
    std::free(resolved);
    if (in_proc) return link;
    hop = next;
  }
  return "";
}

}  // namespace blockmm::io
