// HDF5 plumbing shared by the hdf5_*.cpp files (never included outside src/io): owned handles
// that close themselves, one-line error text taken from HDF5's error stack, and the file
// access settings blockmm uses. HDF5's automatic error printing is switched off so that every
// failure reaches the user as blockmm's own one-line message.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace blockmm::io::hdf5 {

// Turns off HDF5's printing of its error stack. Per thread in thread-safe HDF5 builds, so every
// entry point that may run on a helper thread calls it.
void silence_errors();

// ": <the most specific message on HDF5's error stack>", or "" when the stack is empty. Call it
// right after the failing HDF5 call: the next call clears the stack.
std::string error_detail();

// An HDF5 identifier and the function that releases it.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { close(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      close();
      id_ = other.id_;
      closer_ = other.closer_;
      other.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and says whether that worked (a file's close writes its metadata).
  bool close() noexcept {
    if (id_ < 0) return true;
    const herr_t status = closer_(id_);
    id_ = -1;
    return status >= 0;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// File access property list: default driver; file locking off when `lock` is false and, when
// the library can, ignored on file systems that do not support it (NFS, Lustre mounts without
// flock): blockmm coordinates its own writers, and inputs are opened read-only.
Handle file_access(bool lock);

// Describes an HDF5 datatype for messages: "unsigned 16-bit integer", "64-bit float", ...
std::string describe_type(hid_t type);

}  // namespace blockmm::io::hdf5
