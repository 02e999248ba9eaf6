// The one kernel interface: build (operands from records), symbolic (which output tiles are
// non-empty) and numeric (compute them), chosen at run time like Ginkgo's executors, so that the
// driver holds no #ifdefs.
// Backends: reference (serial, obviously right: the test oracle), cpu (OpenMP), cuda.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend_steps.hpp"
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
  // Another call's report added (a backend's several calls: rows shared, panels of B).
  void add(const NumericReport& part) {
    compute_seconds += part.compute_seconds;
    sink_seconds += part.sink_seconds;
    chunks += part.chunks;
    if (!part.device.empty()) device = part.device;
  }
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

// What a backend can do, read by the distribution (multiply/) alone.
struct BackendTraits {
  // numeric() honours NumericOptions::next_tiles (rows shared with neighbouring ranks).
  bool computes_handed_out_tiles = false;
  // Its right operands are host memory that the ranks of a node may read from one shared copy.
  bool right_operand_shareable = false;
  // It computes on a device of its own (a GPU): several of them in one process are a team.
  bool device = false;
};

// A GPU backend's device memory in one product (kernels/cuda/device_ledger.hpp), in bytes.
struct DeviceMemoryReport {
  std::int64_t budget = 0;       // --mem-budget (0: a share of the free memory)
  // The most its GPU's ledger held at once: every device array by its allocator pages, cuBLAS's
  // workspace, and the reserve for what CUDA allocates on its own.
  std::int64_t ledger_peak = 0;
  // The most the GPU's free memory fell below where it stood when the process's first backend
  // began on it (its context made, nothing allocated), and the most of that beyond the ledger's
  // arrays (the kernels' modules, cuBLAS's handle, partly used pages): cudaMemGetInfo sampled at
  // the backend's phases, or around every allocation and free where `every_allocation` (a
  // developer setting). Device-wide: other processes on the GPU count too. -1: not sampled.
  std::int64_t observed_peak = -1;
  std::int64_t beyond_arrays_peak = -1;
  bool every_allocation = false;
};

struct BackendCounters {
  std::int64_t bytes_built = 0;       // record bytes it built operands from (uploaded, for a GPU)
  std::int64_t bytes_from_peers = 0;  // operand bytes copied in from another backend
  DeviceMemoryReport device_memory;   // GPU backends
};

// One run's kernels. A backend builds its own operands where it computes (host memory or a
// GPU), so that the records are the only contract with partition and io.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual BackendTraits traits() const = 0;
  // Builds an operand from `records` (every record's block-row in [spec.row_begin,
  // spec.row_end)): CSR (and CSC for the right operand), all-zero blocks dropped, masks.
  // Throws InputError with spec.duplicate_message's text on a duplicate block.
  virtual std::unique_ptr<Operand> build(RecordSource& records, const OperandSpec& spec) = 0;
  // Block products (pairs A(i,k), B(k,j)) of the panel: the work every backend must do.
  virtual std::int64_t block_products(const Operand& a, const Operand& b) = 0;
  // Exact: a tile is in the pattern iff it has a non-zero value.
  virtual std::unique_ptr<ProductPattern> symbolic(const Operand& a, const Operand& b) = 0;
  // Computes the pattern's tiles and hands them to `sink` in order, in chunks, from the calling
  // thread.
  virtual NumericReport numeric(const Operand& a, const Operand& b, const ProductPattern& pattern, RecordSink& sink,
                                const NumericOptions& options) = 0;

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
  virtual std::vector<std::int64_t> row_products(const Operand& a, const Operand& b) = 0;
  // The block-rows [row_begin, row_end) of the left operand `a`, as an operand of their own.
  virtual std::unique_ptr<Operand> slice_rows(const Operand& a, std::int32_t row_begin, std::int32_t row_end) = 0;

  // Teams: several backends of one kind in one process (one a GPU), which the distribution
  // splits a rank's work over. An operand that another backend of the same kind built, held here
  // as a copy of its own (between GPUs: a peer copy, over NVLink where there is one).
  virtual std::unique_ptr<Operand> copy_operand(const Operand& source) = 0;
  // Bytes that an operand built from `records` holds where this backend keeps it, once built (its
  // build's own peak is the backend's to keep within its room: a GPU builds on the host what would
  // not fit), and the bytes it may still hold beside what it holds now (0: no bound it knows of).
  // An operand whose spec asks for host memory takes none of the device's.
  virtual std::int64_t operand_bytes(const RecordSource& records, const OperandSpec& spec) const = 0;
  virtual std::int64_t memory_room() const { return 0; }
  // Device memory a numeric phase needs at least beside its operands and pattern (its smallest
  // chunks), for a plan that splits B to make room; 0 where memory is not bounded.
  virtual std::int64_t numeric_bytes_at_least(std::int32_t m) const {
    (void)m;
    return 0;
  }

  // Device memory a pattern of `tiles` tiles over `rows` block-rows holds until its numeric
  // phase; 0 where memory is not bounded.
  virtual std::int64_t pattern_bytes(std::int64_t tiles, std::int32_t rows) const {
    (void)tiles, (void)rows;
    return 0;
  }

  // Right operands that the ranks of a node share (traits().right_operand_shareable): the bytes
  // a packed copy of `b` takes, the packing, and an operand over a packed copy that `storage`
  // keeps alive.
  virtual std::int64_t packed_bytes(const Operand& b) const;
  virtual void pack(const Operand& b, std::byte* to) const;
  virtual std::unique_ptr<Operand> unpack(const std::byte* packed, std::int64_t bytes, std::shared_ptr<const void> storage);

  // What it moved: for a team's report.
  virtual BackendCounters counters() const { return {}; }
  // A backend made for one product and kept for the next (a batch): its steps and counters
  // start again from zero, so that each product reports its own.
  virtual void begin_product() {}

  // Seconds of the backend's own steps inside the phases (e.g. the upload within the build, the
  // numeric paths' predictions); none measured where a backend has nothing finer to say.
  virtual BackendSteps steps() const { return {}; }
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
  // Sample the GPU's free memory around every device allocation and free, for the observed peak
  // of DeviceMemoryReport (a driver call each: for tests and measurements).
  bool probe_memory = false;
  std::int64_t symbolic_batch_bytes = 0;  // scratch of one symbolic batch; 0: a quarter of the room
};

// A rank's work as estimated from the headers before any operand exists (zeros: unknown).
struct WorkEstimate {
  std::int64_t n = 0;
  std::int32_t m = 0;
  std::int32_t rows = 0;
  std::int64_t block_products = 0;
  std::int64_t input_blocks = 0;  // A's and B's records the rank builds from
};

// One rank's panel from the headers alone: its share of the block-rows, and k_A k_B / p block
// products as if blocks were spread evenly, shared among the ranks.
WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks, int ranks);

// Useful multiply-adds of an estimate (block products x m^3), saturated at INT64_MAX.
std::int64_t estimated_macs(const WorkEstimate& estimate);

// The tiles of a product of A's `rows` block-rows (`a_blocks` blocks) and B (`b_blocks` blocks
// over p block-rows and columns), for a plan: no more than A's rows times B's columns, nor than
// the block products were B's rows alike.
std::int64_t estimated_tiles(std::int64_t a_blocks, std::int64_t b_blocks, std::int32_t rows, std::int32_t p);

struct ReferenceConfig {
  // Under MPI on one node, every rank builds both inputs whole and keeps its rows
  // (multiply/whole_inputs.hpp), the path the cuda backend takes, here testable without a GPU.
  bool whole_inputs = false;
};
std::unique_ptr<Backend> make_reference_backend(const ReferenceConfig& config = {});

struct CpuConfig {
  int threads = 0;  // OpenMP threads; 0 keeps the runtime's default
};
std::unique_ptr<Backend> make_cpu_backend(const CpuConfig& config = {});

}  // namespace blockmm::kernels
