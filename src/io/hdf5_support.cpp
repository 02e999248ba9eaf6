// HDF5 error handling, handles and file access settings (hdf5_support.hpp).
#include "io/hdf5_support.hpp"

namespace blockmm::io::hdf5 {
namespace {

herr_t take_most_specific(unsigned position, const H5E_error2_t* entry, void* data) {
  // Walking upward, the first entry is the innermost one: the actual cause.
  if (position == 0 && entry->desc != nullptr) *static_cast<std::string*>(data) = entry->desc;
  return 0;
}

}  // namespace

void silence_errors() {
  // HDF5 1.10 crashes in its atexit clean-up after a file's close has failed (a full disk, say),
  // turning a clean exit 4 into a segfault. Every file blockmm opens is closed explicitly, so the
  // clean-up is not needed: skip it. This only works before the library starts, which the first
  // call here, ahead of any other HDF5 call of blockmm, ensures; later calls fail harmlessly.
  H5dont_atexit();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string error_detail() {
  std::string text;
  if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_most_specific, &text) < 0 || text.empty()) return "";
  for (char& c : text)  // one line, and no control characters from whatever HDF5 quotes
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  // System-call failures read "file write failed: time = ..., errno = 27, error message = 'File
  // too large', buf = ...": keep the first clause and the system's message.
  const std::string marker = "error message = '";
  const std::size_t at = text.find(marker);
  if (at != std::string::npos) {
    const std::size_t from = at + marker.size();
    const std::size_t to = text.find('\'', from);
    const std::string head = text.substr(0, text.find_first_of(",:"));
    text = head + ": " + text.substr(from, to == std::string::npos ? std::string::npos : to - from);
  }
  constexpr std::size_t kLongest = 200;  // one line, whatever HDF5 says
  if (text.size() > kLongest) text = text.substr(0, kLongest) + "...";
  return " (HDF5: " + text + ")";
}

Handle file_access(bool lock) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid()) return fapl;
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
  H5Pset_file_locking(fapl.get(), lock ? 1 : 0, 1);
#else
  (void)lock;  // older libraries: HDF5_USE_FILE_LOCKING=FALSE in the environment does the same
#endif
  return fapl;
}

std::string describe_type(hid_t type) {
  const std::size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned " : "signed ") + std::to_string(bits) +
             "-bit integer";
    case H5T_FLOAT: return std::to_string(bits) + "-bit float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_TIME: return "time";
    default: return "unknown type";
  }
}

}  // namespace blockmm::io::hdf5
