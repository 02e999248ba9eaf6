#include "settings/settings.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace blockmm::settings {
namespace {

const std::vector<Variable> kTable = {
    {"BLOCKMM_MPI", Audience::user, "0|1", "MPI off or on (default: on when started by an MPI launcher)"},
    {"BLOCKMM_PROGRESS_INTERVAL", Audience::user, "seconds in (0, 86400]", "seconds between progress lines in logs (default 5)"},
    {"BLOCKMM_WRITE_THREADS", Audience::user, "1..64",
     "threads that copy a rank's output into the file through shared maps (default: mapped with up to 8 threads for "
     "binary output into tmpfs by a rank of 4 or more threads, else one pwrite stream)"},
    {"BLOCKMM_SHARE_B", Audience::user, "0|1", "0: each cpu rank of a node keeps its own copy of B (default 1: one copy a node)"},
    {"BLOCKMM_SHARE_ROWS", Audience::user, "0|1|give",
     "0: ranks of a node never compute their neighbours' rows; 1: always (default: where the work repays it)"},
    {"BLOCKMM_LIBRARY_TIMEOUT", Audience::user, "seconds 1..86399",
     "longest time one HDF5 metadata call may take on a malformed file before it is refused (default 60)"},
    {"BLOCKMM_IO", Audience::developer, "posix|pwrite|mpi",
     "how ranks read and write the files: POSIX (pwrite: without the output's shared map) or MPI-IO (default: MPI-IO "
     "when the ranks span nodes)"},
    {"BLOCKMM_RELABEL", Audience::developer, "auto|on|off", "compact labels of the block indices in use (default: where n/m is large against the records)"},
    {"BLOCKMM_SIMULATE_NODES", Audience::developer, "0|1", "every rank its own node: the multi-node paths on one machine"},
    {"BLOCKMM_WHOLE_INPUTS", Audience::developer, "0|1", "the reference backend builds whole inputs on every rank, as the cuda backend does"},
    {"BLOCKMM_MPI_PIECE_BYTES", Audience::developer, "8..2^30-1", "largest piece of one MPI call (default 1 GiB), so tests cross pieces"},
    {"BLOCKMM_TMPFS_FALLOCATE", Audience::developer, "0|1", "1: reserve tmpfs output with fallocate (the old way), for comparisons"},
    {"BLOCKMM_HUGE_OUTPUT", Audience::developer, "0|1",
     "0: output on tmpfs stays in 4 KiB pages instead of 2 MiB folios (for comparisons)"},
    {"BLOCKMM_WORKERS", Audience::developer, "1..64",
     "backends a process drives (default: one a GPU it uses; host backends one): several host backends run the "
     "multi-GPU paths without a GPU"},
    {"BLOCKMM_B_PANELS", Audience::developer, "1..65536",
     "a team of backends splits B into this many block-column panels even where it fits each (more panels than "
     "backends: streamed)"},
    {"BLOCKMM_CUDA_DENSE", Audience::developer, "0|1", "the cuda backend's dense tensor-core path never or always"},
    {"BLOCKMM_CUDA_DENSE_TYPE", Audience::developer, "planes|f64", "the dense path's encoding: four byte-plane products, or float64"},
    {"BLOCKMM_CUDA_GENERIC", Audience::developer, "0|1", "1: the generic sparse tile kernel for every block size"},
    {"BLOCKMM_CUDA_BUILD", Audience::developer, "host|device", "where the cuda backend builds its operands"},
    {"BLOCKMM_CUDA_TC", Audience::developer, "0|1", "block products of the sparse path on tensor cores never or always"},
    {"BLOCKMM_CUDA_PROBE_MEMORY", Audience::developer, "0|1",
     "1: sample each GPU's free memory around every device allocation (--stats=json's observed device peak)"},
    {"BLOCKMM_TEST_NODE_MEMORY", Audience::developer, "pause|refuse=R",
     "tests: the node's rank R cannot open the node's shared memory, or its first rank stops once it allocated it"},
    {"BLOCKMM_TEST_PAUSE", Audience::developer, "numeric",
     "tests: each rank stops for up to a minute as its numeric phase starts (its output begun), saying so on stderr"},
};

// Reads one variable with its parser; a parser returns false for a malformed value.
class Reader {
 public:
  explicit Reader(const Lookup& lookup) : lookup_(lookup) {}
  template <typename Parse>
  void read(const char* name, Parse&& parse) {
    const char* value = lookup_(name);
    if (value == nullptr || *value == '\0') return;
    const Variable* variable = find(name);
    if (!parse(std::string(value)))
      throw UsageError(std::string(name) + "='" + quoted_value(value) + "': expected " +
                       (variable != nullptr ? variable->values : "another value"));
    given_.push_back(std::string(name) + "=" + value);
  }
  std::vector<std::string> take_given() { return std::move(given_); }

 private:
  static const Variable* find(const char* name) {
    for (const Variable& v : kTable)
      if (std::strcmp(v.name, name) == 0) return &v;
    return nullptr;
  }
  const Lookup& lookup_;
  std::vector<std::string> given_;
};

bool parse_flag(const std::string& text, bool& out) {
  if (text == "0") out = false;
  else if (text == "1") out = true;
  else return false;
  return true;
}

// "0|1" as a switch that stays automatic where unset.
bool parse_flag_switch(const std::string& text, Switch& out) {
  if (text == "0") out = Switch::off;
  else if (text == "1") out = Switch::on;
  else return false;
  return true;
}

bool parse_auto_on_off(const std::string& text, Switch& out) {
  if (text == "auto") out = Switch::automatic;
  else if (text == "on") out = Switch::on;
  else if (text == "off") out = Switch::off;
  else return false;
  return true;
}

// A whole decimal number in [low, high].
bool parse_integer(const std::string& text, long long low, long long high, long long& out) {
  if (text.empty() || text.size() > 19) return false;
  for (const char c : text)
    if (c < '0' || c > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < low || value > high) return false;
  out = value;
  return true;
}

}  // namespace

Lookup process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

const std::vector<Variable>& table() { return kTable; }

Settings Settings::read(const Lookup& lookup) {
  Settings s;
  Reader r(lookup);
  r.read("BLOCKMM_MPI", [&](const std::string& t) { return parse_flag_switch(t, s.mpi); });
  r.read("BLOCKMM_PROGRESS_INTERVAL", [&](const std::string& t) {
    char* end = nullptr;
    const double seconds = std::strtod(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0' || !(seconds > 0) || seconds > 86400) return false;
    s.progress_interval = seconds;
    return true;
  });
  r.read("BLOCKMM_WRITE_THREADS", [&](const std::string& t) {
    long long v = 0;
    if (!parse_integer(t, 1, 64, v)) return false;
    s.write_threads = static_cast<int>(v);
    return true;
  });
  r.read("BLOCKMM_IO", [&](const std::string& t) {
    if (t == "posix") s.file_io = FileIo::posix;
    else if (t == "pwrite") s.file_io = FileIo::pwrite;
    else if (t == "mpi") s.file_io = FileIo::mpi;
    else return false;
    return true;
  });
  r.read("BLOCKMM_SHARE_B", [&](const std::string& t) { return parse_flag(t, s.share_b); });
  r.read("BLOCKMM_SHARE_ROWS", [&](const std::string& t) {
    if (t == "0") s.share_rows = ShareRows::off;
    else if (t == "1") s.share_rows = ShareRows::on;
    else if (t == "give") s.share_rows = ShareRows::give;
    else return false;
    return true;
  });
  r.read("BLOCKMM_RELABEL", [&](const std::string& t) { return parse_auto_on_off(t, s.relabel); });
  r.read("BLOCKMM_LIBRARY_TIMEOUT", [&](const std::string& t) {
    long long v = 0;
    if (!parse_integer(t, 1, 86399, v)) return false;
    s.library_timeout = static_cast<unsigned>(v);
    return true;
  });
  r.read("BLOCKMM_SIMULATE_NODES", [&](const std::string& t) { return parse_flag(t, s.simulate_nodes); });
  r.read("BLOCKMM_WHOLE_INPUTS", [&](const std::string& t) { return parse_flag(t, s.reference_whole_inputs); });
  r.read("BLOCKMM_MPI_PIECE_BYTES", [&](const std::string& t) {
    long long v = 0;
    if (!parse_integer(t, 8, (1LL << 30) - 1, v)) return false;
    s.mpi_piece_bytes = v;
    return true;
  });
  r.read("BLOCKMM_TMPFS_FALLOCATE", [&](const std::string& t) { return parse_flag(t, s.tmpfs_fallocate); });
  r.read("BLOCKMM_HUGE_OUTPUT", [&](const std::string& t) { return parse_flag(t, s.huge_output); });
  r.read("BLOCKMM_WORKERS", [&](const std::string& t) {
    long long v = 0;
    if (!parse_integer(t, 1, 64, v)) return false;
    s.workers = static_cast<int>(v);
    return true;
  });
  r.read("BLOCKMM_B_PANELS", [&](const std::string& t) {
    long long v = 0;
    if (!parse_integer(t, 1, 65536, v)) return false;
    s.b_panels = static_cast<int>(v);
    return true;
  });
  r.read("BLOCKMM_CUDA_DENSE", [&](const std::string& t) { return parse_flag_switch(t, s.cuda.dense); });
  r.read("BLOCKMM_CUDA_DENSE_TYPE", [&](const std::string& t) {
    if (t == "planes") s.cuda.dense_type = CudaOverrides::DenseType::byte_planes;
    else if (t == "f64") s.cuda.dense_type = CudaOverrides::DenseType::float64;
    else return false;
    return true;
  });
  r.read("BLOCKMM_CUDA_GENERIC", [&](const std::string& t) { return parse_flag(t, s.cuda.generic_kernel); });
  r.read("BLOCKMM_CUDA_BUILD", [&](const std::string& t) {
    if (t == "host") s.cuda.build = CudaOverrides::Build::host;
    else if (t == "device") s.cuda.build = CudaOverrides::Build::device;
    else return false;
    return true;
  });
  r.read("BLOCKMM_CUDA_TC", [&](const std::string& t) { return parse_flag_switch(t, s.cuda.tensor_core_blocks); });
  r.read("BLOCKMM_CUDA_PROBE_MEMORY", [&](const std::string& t) { return parse_flag(t, s.cuda.probe_memory); });
  r.read("BLOCKMM_TEST_NODE_MEMORY", [&](const std::string& t) {
    long long v = 0;
    if (t == "pause") s.test_node_memory_pause = true;
    else if (t.rfind("refuse=", 0) == 0 && parse_integer(t.substr(7), 0, 1 << 20, v)) s.test_node_memory_refuse = static_cast<int>(v);
    else return false;
    return true;
  });
  r.read("BLOCKMM_TEST_PAUSE", [&](const std::string& t) {
    s.test_pause_numeric = t == "numeric";
    return s.test_pause_numeric;
  });
  s.given = r.take_given();

  // Not blockmm's own: taken as they are, checked where they are used.
  if (const char* v = lookup("OMP_NUM_THREADS")) s.omp_num_threads = v;
  if (const char* v = lookup("TERM")) s.terminal = v;
  if (const char* v = lookup("COLUMNS"); v != nullptr && *v != '\0') {
    long long columns = 0;
    if (parse_integer(v, 1, 100000, columns)) s.columns = static_cast<int>(columns);
  }
  return s;
}

}  // namespace blockmm::settings
