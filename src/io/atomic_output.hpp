// Outputs appear whole or not at all: data goes to a temporary file created with O_EXCL beside
// the target (so a run never writes through someone else's file or link), which is fsync'd and
// renamed over the target only when complete. Interrupted runs (SIGINT, SIGTERM, SIGHUP) remove
// the temporary file from a signal handler. A character device as target (/dev/null, say, for
// timing runs) is written in place: renaming over it would replace the device node.
#pragma once

#include <string>

#include "comm/communicator.hpp"

namespace blockmm::io {

// Installs the signal handlers that remove a registered temporary file. Call once, early.
void install_cleanup_handlers();

// Removes the registered temporary file; async-signal-safe, for handlers that end the process.
void remove_temporary_from_signal_handler() noexcept;

class AtomicOutput {
 public:
  // Collective: rank 0 creates "<dir>/.<name>.tmp-XXXXXX" and every rank learns its name.
  // Throws OutputError (exit 4) when the directory does not take new files.
  AtomicOutput(const std::string& target, const comm::Communicator& comm);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  // Where to write: the temporary file, or the target itself when it is a character device.
  const std::string& temporary_path() const { return temporary_; }
  bool writes_in_place() const { return in_place_; }
  const std::string& target() const { return target_; }

  // Collective, after every rank has closed the file: rank 0 renames it over the target and
  // syncs the directory; all ranks learn the outcome.
  void commit();
  void abandon() noexcept;

 private:
  const comm::Communicator& comm_;
  std::string target_;
  std::string temporary_;
  bool done_ = false;
  bool in_place_ = false;
};

}  // namespace blockmm::io
