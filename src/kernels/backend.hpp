// The one kernel interface: symbolic (which output tiles are non-empty) and numeric (compute
// them), chosen at run time like Ginkgo's executors, so that the driver holds no #ifdefs.
// Backends: reference (serial, obviously right: the test oracle), cpu (OpenMP), cuda.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/block_matrix.hpp"
#include "core/record_sink.hpp"

namespace blockmm::kernels {

// C panel = A panel x B. `a` holds the panel's block-rows (column masks), `b` the block-rows
// of B that the panel touches (row masks, CSR and CSC).
struct Operands {
  const BlockMatrix& a;
  const BlockMatrix& b;
};

struct NumericOptions {
  // Upper bound on the bytes of output records a backend holds at once (host or device);
  // the tile list is processed in chunks of at most this size.
  std::int64_t chunk_bytes = std::int64_t{256} << 20;
  // Device memory a GPU backend may use; 0 picks a safe fraction of the free memory.
  std::int64_t device_memory_budget = 0;
  // Called after each chunk is handed to the sink, with the tiles done so far.
  std::function<void(std::int64_t tiles_done)> progress;
  // When set, backends may add each finished tile (or row of tiles) to it from inside their
  // loops, for a progress display that moves within a chunk; relaxed increments suffice.
  std::atomic<std::int64_t>* tiles_computed = nullptr;
};

struct NumericReport {
  double compute_seconds = 0;  // kernel time (device busy time for GPU backends)
  double sink_seconds = 0;     // time spent inside RecordSink::write, in the backend's thread
  std::int64_t chunks = 0;
  std::string device;          // what ran it, for --stats
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Optional: start moving the operands to where numeric() needs them (a GPU), so that this
  // overlaps the symbolic phase. Called at most once, from another thread than symbolic().
  virtual void prepare(const Operands& /*operands*/) {}
  virtual TilePattern symbolic(const Operands& operands) = 0;
  virtual NumericReport numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                                const NumericOptions& options) = 0;
};

enum class BackendKind { reference, cpu, cuda };

BackendKind parse_backend_kind(const std::string& name);  // throws UsageError
std::string to_string(BackendKind kind);

struct BackendConfig {
  int threads = 0;  // OpenMP threads for the cpu backend; 0 keeps the runtime's default
  int device = -1;  // CUDA device ordinal; -1: chosen by the backend
  int device_sharers = 1;  // ranks sharing that device (they split its memory)
};

// Throws ResourceError when the kind cannot run here (cuda without a build or a device).
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendConfig& config);

// Whether this build contains the CUDA backend and at least one device is visible. Cheap: it
// never creates a CUDA context when no device node exists.
bool cuda_device_available();

// Block products (pairs A(i,k), B(k,j)) of the panel: the work every backend must do.
std::int64_t count_block_products(const Operands& operands);

}  // namespace blockmm::kernels
