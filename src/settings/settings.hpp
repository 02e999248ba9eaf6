// settings: every value blockmm takes from its environment, read once when a program starts
// (Settings::read) and handed down as parameters. This module holds the one reader of the
// process environment: no other file calls getenv. One policy for every variable: unset or
// empty means the default, a value outside the documented ones is a UsageError naming the
// variable. The table of variables (kTable) is what --help, docs/environment.md and --stats=json
// show.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace blockmm::settings {

// A variable's value ("" where set empty), or nullptr where it is unset.
using Lookup = std::function<const char*(const char*)>;

// The process environment, as a Lookup (the one getenv).
Lookup process_environment();

enum class Audience { user, developer };

struct Variable {
  const char* name;
  Audience audience;
  const char* values;   // what it accepts, e.g. "0|1"
  const char* meaning;  // one line
};

// Every BLOCKMM_* variable that blockmm and its tools read, users' first.
const std::vector<Variable>& table();

enum class Switch { automatic, on, off };
enum class FileIo { automatic, posix, pwrite, mpi };
enum class ShareRows { automatic, off, on, give };

// Choices the cuda backend otherwise makes for itself, for comparisons and tests.
struct CudaOverrides {
  Switch dense = Switch::automatic;                 // BLOCKMM_CUDA_DENSE
  enum class DenseType { automatic, byte_planes, float64 } dense_type = DenseType::automatic;
  bool generic_kernel = false;                      // BLOCKMM_CUDA_GENERIC
  enum class Build { automatic, device, host } build = Build::automatic;
  Switch tensor_core_blocks = Switch::automatic;    // BLOCKMM_CUDA_TC
  bool probe_memory = false;                        // BLOCKMM_CUDA_PROBE_MEMORY
};

struct Settings {
  // For users.
  Switch mpi = Switch::automatic;      // BLOCKMM_MPI
  double progress_interval = 5;        // BLOCKMM_PROGRESS_INTERVAL, seconds
  int write_threads = 0;               // BLOCKMM_WRITE_THREADS, 0: chosen by the writer
  FileIo file_io = FileIo::automatic;  // BLOCKMM_IO
  bool share_b = true;                 // BLOCKMM_SHARE_B
  ShareRows share_rows = ShareRows::automatic;  // BLOCKMM_SHARE_ROWS
  Switch relabel = Switch::automatic;  // BLOCKMM_RELABEL
  unsigned library_timeout = 60;       // BLOCKMM_LIBRARY_TIMEOUT, seconds

  // For developers: tests and comparisons.
  bool simulate_nodes = false;         // BLOCKMM_SIMULATE_NODES
  bool reference_whole_inputs = false; // BLOCKMM_WHOLE_INPUTS
  std::int64_t mpi_piece_bytes = 0;    // BLOCKMM_MPI_PIECE_BYTES, 0: 1 GiB
  bool tmpfs_fallocate = false;        // BLOCKMM_TMPFS_FALLOCATE
  bool huge_output = true;             // BLOCKMM_HUGE_OUTPUT
  int workers = 0;                     // BLOCKMM_WORKERS, 0: one a GPU it uses (host backends: one)
  int b_panels = 0;                    // BLOCKMM_B_PANELS, 0: as the backends' memory requires
  CudaOverrides cuda;
  int test_node_memory_refuse = -1;    // BLOCKMM_TEST_NODE_MEMORY=refuse=R
  bool test_node_memory_pause = false; // BLOCKMM_TEST_NODE_MEMORY=pause
  bool test_pause_numeric = false;     // BLOCKMM_TEST_PAUSE=numeric

  // Environment that is not blockmm's own but changes what it does (nullptr-free copies, ""
  // where unset).
  std::string omp_num_threads;         // OMP_NUM_THREADS
  std::string terminal;                // TERM
  int columns = 0;                     // COLUMNS, 0 where unset or not a count

  // "NAME=value" of every variable of the table that was set, for --stats=json.
  std::vector<std::string> given;

  // Reads every variable of the table through `lookup`. Throws UsageError naming the first
  // malformed one.
  static Settings read(const Lookup& lookup);
};

}  // namespace blockmm::settings
