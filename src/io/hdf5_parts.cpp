// A parted output's part files, checked and read (hdf5_parts.hpp).
#include "io/hdf5_parts.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include "core/error.hpp"
#include "io/output_parts.hpp"

namespace blockmm::io {
namespace {

using hdf5::Handle;
using hdf5::printable;

constexpr char kPartFormat[] = "blockmm-bsr-part";
constexpr std::int64_t kVersion = 1;

hid_t native_value_type(ValueWidth width) { return width == ValueWidth::u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32; }

std::string range_text(std::int64_t first, std::int64_t end) {
  return "[" + std::to_string(first) + ", " + std::to_string(end) + ")";
}

// A name from a virtual dataset's mapping (any bytes: it is the file's claim), or nothing where
// libhdf5 cannot give it or it is longer than any file name.
std::optional<std::string> mapping_text(ssize_t (*get)(hid_t, size_t, char*, size_t), hid_t plist, size_t index) {
  const ssize_t length = get(plist, index, nullptr, 0);
  if (length < 0 || length > 4 * NAME_MAX) return std::nullopt;
  std::string text(static_cast<std::size_t>(length) + 1, '\0');
  if (get(plist, index, text.data(), text.size()) != length) return std::nullopt;
  text.resize(static_cast<std::size_t>(length));
  return text;
}

}  // namespace

struct BsrParts::Open {
  int fd = -1;
  Handle file;
  Handle indices;
  Handle data;
  std::unique_ptr<hdf5::CheckedFile> checks;
  ~Open() {
    data.close();
    indices.close();
    file.close();
    if (fd >= 0) ::close(fd);
  }
};

BsrParts::BsrParts(const std::string& main_path, const hdf5::CheckedFile& main, hid_t indices, hid_t data,
                   const BsrHeader& header, std::int64_t parts)
    : main_path_(main_path), header_(header), main_(main) {
  const std::size_t slash = main_path.rfind('/');
  folder_ = slash == std::string::npos ? "." : slash == 0 ? "/" : main_path.substr(0, slash);
  base_ = slash == std::string::npos ? main_path : main_path.substr(slash + 1);

  // The main file's record of its parts (its user block): the generation every part is named by.
  std::string bytes(static_cast<std::size_t>(kPartsUserBlockBytes), '\0');
  const int fd = ::open(main_path.c_str(), O_RDONLY | O_CLOEXEC);
  const ssize_t got = fd >= 0 ? ::pread(fd, bytes.data(), bytes.size(), 0) : -1;
  if (fd >= 0) ::close(fd);
  bytes.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  const std::optional<PartsRecord> record = parse_parts_user_block(bytes);
  if (!record)
    main.fail("root attribute parts = " + std::to_string(parts) +
              " says it is a parted output, but its first 512 bytes hold no blockmm part record");
  if (record->parts != parts)
    main.fail("root attribute parts = " + std::to_string(parts) + " but its part record says " +
              std::to_string(record->parts));
  generation_ = record->generation;
  parts_.resize(static_cast<std::size_t>(parts));

  check_mapping(indices, "indices", "/indices", false);
  check_mapping(data, "data", "/data", true);
  if (parts_.back().first + parts_.back().blocks != header.nnzb)
    main.fail("the parts of /indices and /data hold " + std::to_string(parts_.back().first + parts_.back().blocks) +
              " blocks; nnzb = " + std::to_string(header.nnzb));
  for (std::size_t k = 0; k < parts_.size(); ++k) open_part(k, true);
}

BsrParts::~BsrParts() = default;

// The virtual dataset's mappings, each checked before anything opens a source: part k's name,
// the source dataset, and blocks [first, first + blocks) of the whole taken from all of it.
void BsrParts::check_mapping(hid_t dataset, const char* name, const char* source, bool values) {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!plist.valid()) main_.fail_hdf5(std::string("cannot read the storage of /") + name);
  if (H5Pget_layout(plist.get()) != H5D_VIRTUAL)
    main_.fail(std::string("/") + name + " is not a virtual dataset, yet the root attribute parts says the output is in parts");
  size_t count = 0;
  if (H5Pget_virtual_count(plist.get(), &count) < 0) main_.fail_hdf5(std::string("cannot read the mappings of /") + name);
  if (count != parts_.size())
    main_.fail(std::string("/") + name + " maps " + std::to_string(count) + " sources; the root attribute parts = " +
               std::to_string(parts_.size()));
  const int rank = values ? 3 : 1;
  std::int64_t next = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const std::string where = std::string("/") + name + "'s mapping " + std::to_string(k);
    const std::optional<std::string> file = mapping_text(H5Pget_virtual_filename, plist.get(), k);
    const std::optional<std::string> set = mapping_text(H5Pget_virtual_dsetname, plist.get(), k);
    if (!file || !set) main_.fail_hdf5("cannot read " + where);
    std::string generation;
    int index = -1;
    if (!is_part_name_of(base_, *file, &generation, &index) || generation != generation_ ||
        index != static_cast<int>(k))
      main_.fail(where + " names the file '" + printable(*file) + "', which is not part " + std::to_string(k) + " of " +
                 base_ + " (blockmm reads only its own part files, " + part_name(base_, generation_, static_cast<int>(k)) +
                 " and so on, beside the main file)");
    if (*set != source)
      main_.fail(where + " takes the dataset '" + printable(*set) + "'; a part's is " + source);
    Handle vspace(H5Pget_virtual_vspace(plist.get(), k), H5Sclose);
    Handle sspace(H5Pget_virtual_srcspace(plist.get(), k), H5Sclose);
    if (!vspace.valid() || !sspace.valid()) main_.fail_hdf5("cannot read the selections of " + where);
    // The whole: a box of whole blocks. The source: all of the part's dataset (a selection of
    // "all" stores no extent; the part's own shape is checked when it is opened).
    hsize_t start[3] = {}, end[3] = {};
    const hssize_t points = H5Sget_select_npoints(vspace.get());
    const hsize_t block_values = values ? static_cast<hsize_t>(header_.block_values()) : 1;
    if (H5Sget_simple_extent_ndims(vspace.get()) != rank || points <= 0 ||
        H5Sget_select_bounds(vspace.get(), start, end) < 0)
      main_.fail(where + " is not a block range of the whole");
    if (H5Sget_select_type(sspace.get()) != H5S_SEL_ALL)
      main_.fail(where + " takes a selection of its source; blockmm's parts give all of theirs");
    const std::int64_t first = static_cast<std::int64_t>(start[0]);
    const std::int64_t blocks = static_cast<std::int64_t>(end[0]) - first + 1;
    bool whole_blocks = static_cast<hsize_t>(points) == static_cast<hsize_t>(blocks) * block_values;
    for (int d = 1; d < rank; ++d)
      whole_blocks = whole_blocks && start[d] == 0 && end[d] + 1 == static_cast<hsize_t>(header_.m);
    if (!whole_blocks || first != next)
      main_.fail(where + " maps blocks " + range_text(first, first + blocks) + " from '" + printable(*file) +
                 "'; blockmm's part " + std::to_string(k) + " holds whole blocks from block " + std::to_string(next) + " on");
    Part& part = parts_[k];
    if (values && (part.name != *file || part.first != first || part.blocks != blocks))
      main_.fail(where + " maps blocks " + range_text(first, first + blocks) + "; /indices maps " +
                 range_text(part.first, part.first + part.blocks) + " of that part");
    part.name = *file;
    part.first = first;
    part.blocks = blocks;
    next = first + blocks;
  }
}

// Opens part k without following a link, checks it (the first time) or that it is still the
// file checked then, and opens its datasets.
std::unique_ptr<BsrParts::Open> BsrParts::open_part(std::size_t k, bool first_time) {
  Part& part = parts_[k];
  const std::string path = folder_ + "/" + part.name;
  const std::string shown = main_path_ + ": part file " + part.name;
  auto open = std::make_unique<Open>();
  // O_NONBLOCK: a FIFO in a part's place must not block the open (it is then refused as not regular).
  open->fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (open->fd < 0) {
    if (errno == ELOOP)
      throw InputError(shown + " is a symbolic link; blockmm reads only part files stored under their own name");
    if (errno == ENOENT) throw InputError(shown + " is missing (part files stay beside their main file)");
    throw InputError(shown + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(open->fd, &st) != 0 || !S_ISREG(st.st_mode)) throw InputError(shown + " is not a regular file");
  if (first_time) {
    part.device = static_cast<std::uint64_t>(st.st_dev);
    part.inode = static_cast<std::uint64_t>(st.st_ino);
  } else if (part.device != static_cast<std::uint64_t>(st.st_dev) || part.inode != static_cast<std::uint64_t>(st.st_ino)) {
    throw InputError(shown + " was replaced while being read");
  }
  // libhdf5 opens by name: through this descriptor where /proc shows it, so that what it opens
  // is the file checked here whatever the name points at by then.
  std::string name_for_library = "/proc/self/fd/" + std::to_string(open->fd);
  struct stat via {};
  if (::stat(name_for_library.c_str(), &via) != 0 || via.st_dev != st.st_dev || via.st_ino != st.st_ino)
    name_for_library = path;
  Handle fapl = hdf5::file_access(true);
  open->file = Handle(H5Fopen(name_for_library.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!open->file.valid()) throw InputError(shown + ": cannot open as an HDF5 file" + hdf5::error_detail());
  open->checks = std::make_unique<hdf5::CheckedFile>(
      shown, open->file.get(),
      "a blockmm part file has attributes format = \"blockmm-bsr-part\", version = 1, generation, part, parts, first, "
      "nnzb, m",
      "a part file has /indices and /data");
  const hdf5::CheckedFile& c = *open->checks;
  if (first_time) {
    const std::string format = c.string_attribute("format");
    if (format != kPartFormat) c.fail("root attribute format = \"" + printable(format) + "\"; expected \"" + kPartFormat + "\"");
    const std::int64_t version = c.int_attribute("version");
    if (version != kVersion) c.fail("root attribute version = " + std::to_string(version) + "; expected 1");
    const std::string generation = c.string_attribute("generation");
    const std::pair<const char*, std::int64_t> expected[] = {{"part", static_cast<std::int64_t>(k)},
                                                             {"parts", static_cast<std::int64_t>(parts_.size())},
                                                             {"first", part.first},
                                                             {"nnzb", part.blocks},
                                                             {"m", header_.m}};
    if (generation != generation_)
      c.fail("root attribute generation = \"" + printable(generation) + "\"; the main file's parts are of generation " +
             generation_);
    for (const auto& [name, want] : expected) {
      const std::int64_t value = c.int_attribute(name);
      if (value != want)
        c.fail(std::string("root attribute ") + name + " = " + std::to_string(value) + "; the main file says " +
               std::to_string(want));
    }
  }
  open->indices = c.open_dataset("indices");
  open->data = c.open_dataset("data");
  if (first_time) {
    c.check_integer_type(open->indices.get(), "indices", "int32");
    Handle type(H5Dget_type(open->data.get()), H5Tclose);
    if (!type.valid()) c.fail_hdf5("cannot read the type of /data");
    if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) != H5T_SGN_NONE ||
        H5Tget_size(type.get()) != static_cast<std::size_t>(header_.width))
      c.fail("/data has type " + hdf5::describe_type(type.get()) + "; the main file's /data holds unsigned " +
             std::to_string(8 * static_cast<int>(header_.width)) + "-bit integers");
    c.check_plain_integer(type.get(), "/data");
    const auto blocks = static_cast<hsize_t>(part.blocks), m = static_cast<hsize_t>(header_.m);
    if (c.dims_of(open->indices.get(), "indices") != std::vector<hsize_t>{blocks})
      c.fail("/indices has shape " + hdf5::shape_text(c.dims_of(open->indices.get(), "indices")) + "; it must be (" +
             std::to_string(blocks) + ",)");
    if (c.dims_of(open->data.get(), "data") != std::vector<hsize_t>{blocks, m, m})
      c.fail("/data has shape " + hdf5::shape_text(c.dims_of(open->data.get(), "data")) + "; it must be " +
             hdf5::shape_text({blocks, m, m}));
    c.check_stored(open->indices.get(), "indices", static_cast<std::int64_t>(st.st_size));
    c.check_stored(open->data.get(), "data", static_cast<std::int64_t>(st.st_size));
  }
  return open;
}

void BsrParts::read(std::int64_t first, std::int64_t count, std::int64_t* cols, void* values) {
  const std::int64_t value_bytes = static_cast<std::int64_t>(header_.width) * header_.block_values();
  const auto m = static_cast<hsize_t>(header_.m);
  // The part holding block `first`: the last whose first block is at or before it.
  std::size_t k = static_cast<std::size_t>(
      std::upper_bound(parts_.begin(), parts_.end(), first, [](std::int64_t b, const Part& p) { return b < p.first; }) -
      parts_.begin() - 1);
  for (std::int64_t done = 0; done < count; ++k) {
    const Part& part = parts_[k];
    const std::int64_t local = first + done - part.first;
    const std::int64_t c = std::min(count - done, part.blocks - local);
    if (current_ == nullptr || current_index_ != k) {
      current_.reset();
      current_ = open_part(k, false);
      current_index_ = k;
    }
    const hdf5::CheckedFile& checks = *current_->checks;
    checks.read_hyperslab(current_->indices.get(), "indices", H5T_NATIVE_INT64, {static_cast<hsize_t>(local)},
                          {static_cast<hsize_t>(c)}, cols + done);
    if (values != nullptr)
      checks.read_hyperslab(current_->data.get(), "data", native_value_type(header_.width),
                            {static_cast<hsize_t>(local), 0, 0}, {static_cast<hsize_t>(c), m, m},
                            static_cast<std::byte*>(values) + done * value_bytes);
    done += c;
  }
}

}  // namespace blockmm::io
