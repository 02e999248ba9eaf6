// The one kernel interface: build (operands from records), symbolic (which output tiles are
// non-empty) and numeric (compute them), chosen at run time like Ginkgo's executors, so that the
// driver holds no #ifdefs.
// Backends: reference (serial, obviously right: the test oracle), cpu (OpenMP), cuda.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/block_matrix.hpp"
#include "core/record_sink.hpp"
#include "core/record_source.hpp"

namespace blockmm::kernels {

// The host form of a panel's operands, as the cpu and reference kernels consume them: `a` holds
// the panel's block-rows (column masks), `b` the block-rows of B that the panel touches (row
// masks, CSR and CSC).
struct Operands {
  const BlockMatrix& a;
  BlockRowsView b;  // this rank's B, or the copy its node's ranks share
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
  // When set, the backend computes only the pattern's tiles [begin, end) that this hands out,
  // range after range until it returns false, instead of all of them in order: the ranges a
  // rank claims of rows it shares with its neighbours (partition/row_sharing.hpp). `progress`
  // then counts the tiles computed. Only a backend whose computes_handed_out_tiles() is true
  // takes it.
  std::function<bool(std::int64_t& begin, std::int64_t& end)> next_tiles;
};

struct NumericReport {
  double compute_seconds = 0;  // kernel time (device busy time for GPU backends)
  double sink_seconds = 0;     // time spent inside RecordSink::write, in the backend's thread
  std::int64_t chunks = 0;
  std::string device;          // what ran it, for --stats
};

// An operand as a backend holds it (host CSR/CSC, or arrays on a GPU): built by the backend
// from records, opaque to everyone else.
class Operand {
 public:
  virtual ~Operand() = default;
  virtual std::int64_t blocks() const = 0;  // non-zero blocks kept (all-zero ones are dropped)
};

// The C panel's non-empty tiles as a backend holds them; callers see only the layout.
class ProductPattern {
 public:
  virtual ~ProductPattern() = default;
  const OutputLayout& layout() const { return layout_; }
  std::int64_t tiles() const { return layout_.tiles(); }

 protected:
  OutputLayout layout_;
};

// One run's kernels. A backend builds its own operands where it computes (host memory or a
// GPU), so that the records are the only contract with partition and io.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Builds an operand from `records` (every record's block-row in [spec.row_begin,
  // spec.row_end)): CSR (and CSC for the right operand), all-zero blocks dropped, masks.
  // Throws InputError with spec.duplicate_message's text on a duplicate block.
  virtual std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) = 0;
  // Block products (pairs A(i,k), B(k,j)) of the panel: the work every backend must do.
  virtual std::int64_t block_products(const Operand& a, const Operand& b) = 0;
  // Exact: a tile is in the pattern iff it has a non-zero value.
  virtual std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) = 0;
  // Computes the pattern's tiles and hands them to `sink` in order, in chunks.
  virtual NumericReport numeric(const Operand& a, const Operand& b, const ProductPattern& pattern, RecordSink& sink,
                                const NumericOptions& options) = 0;
  // Whether numeric() honours NumericOptions::next_tiles.
  virtual bool computes_handed_out_tiles() const { return false; }
  // Whether its right operands are host memory that the ranks of a node may read from one
  // shared copy (driver/shared_right_operand.hpp): the host backends.
  virtual bool right_operand_shareable() const { return false; }

  // Whole inputs on every rank. Where building all of A and all of B costs a few hundredths of
  // a second (the cuda backend reads, uploads and sorts them on its device), the ranks of one
  // node each build both whole, balance the block-rows by row_products() and keep their own rows
  // with slice_rows(): no record crosses between ranks and nothing is sorted on the host.
  // Whether this backend does so for these inputs (both whole fit its memory).
  virtual bool builds_whole_inputs(const RecordSource& a, const RecordSource& b) const {
    (void)a;
    (void)b;
    return false;
  }
  // Block products of each block-row of the left operand `a` (one entry a row it holds).
  // Only where builds_whole_inputs() says yes, or on host operands.
  virtual std::vector<std::int64_t> row_products(const Operand& a, const Operand& b);
  // The block-rows [row_begin, row_end) of the left operand `a`, which is consumed, as an
  // operand of their own. Only where builds_whole_inputs() says yes, or on host operands.
  virtual std::unique_ptr<Operand> slice_rows(std::unique_ptr<Operand> a, std::int32_t row_begin, std::int32_t row_end);

  // Seconds of the backend's own steps inside the phases (e.g. the upload within the build),
  // for --stats=json; empty where a backend has nothing finer to say.
  virtual std::map<std::string, double> step_seconds() const { return {}; }
};

enum class BackendKind { reference, cpu, cuda };

BackendKind parse_backend_kind(const std::string& name);  // throws UsageError
std::string to_string(BackendKind kind);

// Choices the cuda backend otherwise makes for itself; tests and comparisons set them.
struct CudaChoices {
  enum class Dense { automatic, always, never };
  enum class Build { automatic, device, host };
  // The dense tiles' encoding: automatic takes the fewest int8 products that are exact for the
  // operands' largest value; byte_planes the four offset byte-plane products whatever the values.
  enum class DenseType { automatic, byte_planes, float64 };
  Dense dense = Dense::automatic;  // dense tensor-core tiles vs sparse tile kernels
  DenseType dense_type = DenseType::automatic;
  bool generic_kernel = false;     // the generic tile kernel for every block size
  // Block products on tensor cores for m = 8, 16, 32 (sparse path); false: the CUDA-core tile
  // kernels, for comparison.
  bool tensor_core_blocks = true;
  Build build = Build::automatic;  // host: build CSR/CSC on the host and upload (the fallback)
  std::int64_t symbolic_batch_bytes = 0;  // scratch of one symbolic batch; 0: a quarter of the room
};

struct BackendConfig {
  int threads = 0;  // OpenMP threads for the cpu backend; 0 keeps the runtime's default
  // The reference backend builds whole inputs on every rank of one node, as the cuda backend
  // does (Backend::builds_whole_inputs): that path under MPI on machines without a GPU.
  bool reference_whole_inputs = false;
  int device = -1;  // CUDA device ordinal; -1: chosen by the backend
  int device_sharers = 1;  // ranks sharing that device (they split its memory)
  // Device memory the backend may use for operands and scratch; 0: a share of the free memory.
  std::int64_t device_memory_budget = 0;
  CudaChoices cuda;
  // This rank's work as the driver estimates it from the headers (zeros: unknown): the cuda
  // backend starts loading cuBLAS at once when its dense path looks likely, beside the build.
  struct WorkEstimate {
    std::int64_t n = 0;
    std::int32_t m = 0;
    std::int32_t rows = 0;
    std::int64_t block_products = 0;
    std::int64_t input_blocks = 0;  // A's and B's records this rank builds from
  } estimate;
};

// Throws ResourceError when the kind cannot run here (cuda without a build or a device).
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendConfig& config);

// Whether this build contains the CUDA backend and at least one device is visible. Cheap: it
// never creates a CUDA context when no device node exists.
bool cuda_device_available();

// Whether a GPU can be here at all, without asking CUDA (which loads its driver, ~0.1 s):
// CUDA_VISIBLE_DEVICES does not hide every device and the driver's device nodes exist.
bool cuda_device_may_exist();

}  // namespace blockmm::kernels
