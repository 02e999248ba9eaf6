#include "io/output_parts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "io/path_names.hpp"

namespace blockmm::io {
namespace {

constexpr char kPartMarker[] = ".part-";
constexpr char kRecordHead[] = "blockmm-parts generation=";

bool all_of(const std::string& text, std::size_t from, std::size_t count, const char* alphabet) {
  if (text.size() < from + count) return false;
  for (std::size_t i = from; i < from + count; ++i)
    if (std::strchr(alphabet, text[i]) == nullptr || text[i] == '\0') return false;
  return true;
}

constexpr char kHex[] = "0123456789abcdef";
constexpr char kDigits[] = "0123456789";

}  // namespace

std::string part_name(const std::string& base, const std::string& generation, int index) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%0*d", kPartIndexDigits, index);
  return base + kPartMarker + generation + "-" + digits;
}

bool is_part_name_of(const std::string& base, const std::string& name, std::string* generation, int* index) {
  const std::size_t marker = sizeof kPartMarker - 1;
  const std::size_t want = base.size() + marker + kPartGenerationDigits + 1 + kPartIndexDigits;
  if (base.empty() || name.size() != want || name.compare(0, base.size(), base) != 0 ||
      name.compare(base.size(), marker, kPartMarker) != 0)
    return false;
  const std::size_t g = base.size() + marker;
  if (!all_of(name, g, kPartGenerationDigits, kHex) || name[g + kPartGenerationDigits] != '-' ||
      !all_of(name, g + kPartGenerationDigits + 1, kPartIndexDigits, kDigits))
    return false;
  const int k = std::atoi(name.c_str() + g + kPartGenerationDigits + 1);
  if (k >= kMaxOutputParts) return false;
  if (generation != nullptr) *generation = name.substr(g, kPartGenerationDigits);
  if (index != nullptr) *index = k;
  return true;
}

std::size_t longest_parted_base(const std::string& host) {
  const std::size_t part_extra = (sizeof kPartMarker - 1) + kPartGenerationDigits + 1 + kPartIndexDigits;
  const std::size_t temporary_extra = kTemporaryNameExtra + host.size();
  const std::size_t used = part_extra + temporary_extra;
  return used < NAME_MAX ? NAME_MAX - used : 0;
}

std::string parts_user_block(const std::string& generation, int parts) {
  std::string text = std::string(kRecordHead) + generation + " parts=" + std::to_string(parts) + "\n";
  text.resize(static_cast<std::size_t>(kPartsUserBlockBytes), '\0');
  return text;
}

std::optional<PartsRecord> parse_parts_user_block(const std::string& bytes) {
  const std::size_t head = sizeof kRecordHead - 1;
  if (bytes.size() < head || bytes.compare(0, head, kRecordHead) != 0) return std::nullopt;
  if (!all_of(bytes, head, kPartGenerationDigits, kHex)) return std::nullopt;
  PartsRecord record;
  record.generation = bytes.substr(head, kPartGenerationDigits);
  const std::string rest = " parts=";
  std::size_t at = head + kPartGenerationDigits;
  if (bytes.compare(at, rest.size(), rest) != 0) return std::nullopt;
  at += rest.size();
  std::size_t digits = 0;
  while (at + digits < bytes.size() && digits < 5 && bytes[at + digits] >= '0' && bytes[at + digits] <= '9') ++digits;
  if (digits == 0 || at + digits >= bytes.size() || bytes[at + digits] != '\n') return std::nullopt;
  record.parts = std::atoi(bytes.substr(at, digits).c_str());
  if (record.parts < 1 || record.parts > kMaxOutputParts) return std::nullopt;
  return record;
}

std::vector<std::string> parts_of_existing_output(const std::string& target, bool follow_links) {
  // Never into a FIFO (nor through a link, unless asked): only a regular file is read.
  const int fd = ::open(target.c_str(), O_RDONLY | (follow_links ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string bytes(static_cast<std::size_t>(kPartsUserBlockBytes), '\0');
  ssize_t got = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = ::pread(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (got <= 0) return {};
  bytes.resize(static_cast<std::size_t>(got));
  const std::optional<PartsRecord> record = parse_parts_user_block(bytes);
  if (!record) return {};
  std::vector<std::string> names;
  for (int k = 0; k < record->parts; ++k) names.push_back(part_name(base_name(target), record->generation, k));
  return names;
}

std::vector<std::string> remove_replaced_parts(const std::string& target, const std::vector<std::string>& names,
                                               const std::string& keep_generation) {
  std::vector<std::string> removed;
  const std::string dir = directory_of(target), base = base_name(target);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return removed;
  for (const std::string& name : names) {
    std::string generation;
    if (!is_part_name_of(base, name, &generation) || generation == keep_generation) continue;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != ::geteuid())
      continue;
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0) removed.push_back(name);
  }
  ::fsync(dir_fd);
  ::close(dir_fd);
  return removed;
}

std::string fresh_part_generation(const std::string& target) {
  const std::string dir = directory_of(target), base = base_name(target);
  std::random_device device;
  for (;;) {
    std::string generation;
    for (int d = 0; d < kPartGenerationDigits; ++d) generation += kHex[device() % 16];
    const std::string prefix = base + kPartMarker + generation + "-";
    bool used = false;
    if (DIR* listing = ::opendir(dir.c_str())) {
      while (const dirent* entry = ::readdir(listing)) {
        const std::string name = entry->d_name;
        // Final names and temporaries ("." + name + ...) alike.
        if (name.compare(0, prefix.size(), prefix) == 0 || name.compare(0, prefix.size() + 1, "." + prefix) == 0) {
          used = true;
          break;
        }
      }
      ::closedir(listing);
    }
    if (!used) return generation;
  }
}

}  // namespace blockmm::io
