// The names and bookkeeping of a parted HDF5 output (docs/output.md): the main file OUT and its
// part files beside it, named from OUT's file name and a generation drawn for each run:
//   OUT.part-<generation>-<index>   generation: 8 lowercase hex digits; index: 4 decimal digits
// e.g. C.h5.part-3f9a1c07-0000. A new generation for each run keeps the parts of an existing
// output untouched until the new main file replaces it (nothing is renamed over them), so that a
// failed run leaves the old output whole. The main file's HDF5 user block (512 bytes before the
// HDF5 superblock, which HDF5 and h5py skip) says, in plain text, which generation and how many
// parts it has, so that the run replacing it removes exactly those parts without reading HDF5.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace blockmm::io {

constexpr int kPartGenerationDigits = 8;
constexpr int kPartIndexDigits = 4;
constexpr int kMaxOutputParts = 4096;        // indices 0000-4095
constexpr std::int64_t kPartsUserBlockBytes = 512;

// "<base>.part-<generation>-<index>".
std::string part_name(const std::string& base, const std::string& generation, int index);
// Whether `name` follows the part naming of the output whose file name is `base`; sets the
// generation and the index where it does.
bool is_part_name_of(const std::string& base, const std::string& name, std::string* generation = nullptr,
                     int* index = nullptr);
// The longest output file name that leaves room for its parts' names and their temporaries'
// (".<part name>.blockmm-tmp.lk.<host>.<pid>.XXXXXX", path_names.hpp) within NAME_MAX.
std::size_t longest_parted_base(const std::string& host);

// The main file's user block: "blockmm-parts generation=<g> parts=<P>\n", NUL-padded to 512 bytes.
std::string parts_user_block(const std::string& generation, int parts);
struct PartsRecord {
  std::string generation;
  int parts = 0;
};
// The record in the first bytes of a file (its user block), or nothing where they hold none.
std::optional<PartsRecord> parse_parts_user_block(const std::string& bytes);

// The part files of the parted output at `target` (read from its user block; nothing where the
// target is not a regular file or holds no record), as names in target's folder. A link at
// `target` is followed only where `follow_links` (a parted input, as its reader follows it).
std::vector<std::string> parts_of_existing_output(const std::string& target, bool follow_links = false);
// Removes those of `names` (in target's folder) that are regular files of this user, leaving any
// whose generation is `keep_generation`. Returns the names removed.
std::vector<std::string> remove_replaced_parts(const std::string& target, const std::vector<std::string>& names,
                                               const std::string& keep_generation);

// A generation no entry of target's folder uses for target's part names (8 random hex digits).
std::string fresh_part_generation(const std::string& target);

}  // namespace blockmm::io
