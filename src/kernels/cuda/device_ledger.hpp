// The device memory the cuda backend counts and plans with, on the host only (unit-tested without
// a GPU): what an allocation takes of a GPU (its footprint in the allocator's pages), what an
// operand holds on the device and what its device build needs at its peak, how much cuBLAS's
// workspace may take, and each GPU's ledger. The ledger holds every device array while it lives
// (device_memory.cuh charges it where it is allocated and takes it back where it is freed),
// cuBLAS's workspace and warm-up among them, and a reserve for what CUDA allocates on its own
// (the kernels' modules, loaded at a kernel's first launch; the pages that small arrays share).
// A backend's room is its budget less what its GPU's ledger holds, so everything it allocates
// is in its plans. The ledger also keeps what the GPU's free memory said when sampled
// (cudaMemGetInfo, by the caller): the measurement against which the budget is checked.
#pragma once

#include <atomic>
#include <cstdint>

namespace blockmm::kernels::cuda {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
// cudaMalloc takes device memory in 2 MiB pages: an array over 1 MiB takes whole pages of its
// own; smaller ones share pages, each rounded to 512 bytes.
constexpr std::int64_t kLargePage = 2 * kMiB;
constexpr std::int64_t kSmallArray = kMiB;
std::int64_t allocation_footprint(std::int64_t bytes);

// Held by the ledger of a GPU while a backend uses it: what CUDA allocates there beside the
// arrays the ledger counts, once the arrays are counted by their pages (the kernels' modules,
// cuBLAS's handle, the partly used pages of small arrays). What a run measured beyond the
// ledger's arrays is in its --stats=json (device_memory.beyond_arrays_peak).
constexpr std::int64_t kUncountedReserve = 8 * kMiB;

// The numeric paths' plans fill the room they are given with their buffers' exact sizes; each
// buffer then rounds up to a page. The room they are given is the backend's less a page for each
// buffer a path allocates that can be large: the sparse path's work units, B's byte planes and
// two output buffers; the dense path's (at most six) tiles and products, units and two outputs.
// The symbolic phase likewise keeps a page for each of its arrays that can be large (per-row
// counts and classes, a batch's keys twice, the columns found, their concatenation) out of the
// room its batches are cut from.
constexpr int kSparsePathBuffers = 4;
constexpr int kDensePathBuffers = 9;
constexpr int kSymbolicBuffers = 8;
constexpr std::int64_t page_slack(int buffers) { return buffers * kLargePage; }

// The least a numeric phase needs beside the operands and pattern, for a plan that splits B to
// make room (Backend::numeric_bytes_at_least): two output buffers of a few of the sparse path's
// work units, its page slack, and 8 MiB for the work units and the pipeline's small arrays.
std::int64_t numeric_minimum_bytes(std::int32_t m);

// The device arrays of an operand built from `records` records of block size m, holding `rows`
// block-rows (of p): row pointers, columns, values and masks, and for a right operand its CSC.
// An upper bound: all-zero blocks are dropped.
std::int64_t operand_device_bytes(std::int64_t records, std::int32_t m, std::int32_t rows, std::int32_t p, bool right);
// A product pattern's device arrays (DevicePattern): row pointers and a column a tile.
std::int64_t pattern_device_bytes(std::int64_t tiles, std::int32_t rows);
// The device build's arrays (device_build.cu) all at once, as an upper bound of its peak: the
// records, the sort's keys, indices and CUB's scratch, the flags and positions, and the result.
std::int64_t device_build_peak_bytes(std::int64_t records, std::int32_t m, std::int32_t rows, std::int32_t p, bool right);

// cuBLAS's workspace (cublasSetWorkspace) for a backend with `room` bytes to plan with: the
// library's own default on Hopper (32 MiB) where the room is large, a sixteenth of it where it is
// not, and at least 1 MiB (cuBLAS picks the GEMM kernels that fit it).
constexpr std::int64_t kCublasWorkspaceMax = 32 * kMiB;
constexpr std::int64_t kCublasWorkspaceMin = kMiB;
// cuBLAS is made ready before the numeric phase (its handle, workspace and warm-up product) only
// where the backend's room is at least this; under a smaller budget its handle is made where the
// dense path's plan fits, so that a run the dense path cannot take never holds what the handle
// itself allocates (outside the ledger, in the reserve).
constexpr std::int64_t kEarlyCublasRoom = std::int64_t{1} << 30;
std::int64_t cublas_workspace_bytes(std::int64_t room);

class DeviceLedger {
 public:
  // Device arrays: their footprints, while they live.
  void charge(std::int64_t bytes);
  void release(std::int64_t bytes);
  // A backend begins or ends on this GPU: the reserve is held while any backend is.
  void attach();
  void detach();
  std::int64_t held() const { return arrays_.load() + reserved_.load(); }
  std::int64_t arrays() const { return arrays_.load(); }
  std::int64_t peak() const { return peak_.load(); }

  // The GPU's free memory, sampled by the caller. The first baseline() given is where usage is
  // measured from (the GPU as its first backend found it: the context made, nothing of blockmm's
  // allocated); each observe() after it keeps the most the free memory fell below it, and the most
  // of that beyond the ledger's arrays.
  void baseline(std::int64_t free_bytes);
  void observe(std::int64_t free_bytes);
  std::int64_t observed_peak() const { return observed_peak_.load(); }  // -1: not observed yet
  std::int64_t beyond_arrays_peak() const { return beyond_peak_.load(); }
  // Sample around every allocation and free (where some backend asked for it), not only at the
  // backend's phases.
  void probe_every_allocation() { probing_ = true; }
  bool probing() const { return probing_.load(std::memory_order_relaxed); }
  // A new product: its peaks start from what is held and was last seen now.
  void restart_peaks();

 private:
  std::atomic<std::int64_t> arrays_{0};
  std::atomic<std::int64_t> reserved_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<int> backends_{0};
  std::atomic<std::int64_t> baseline_{-1};
  std::atomic<std::int64_t> last_used_{-1};
  std::atomic<std::int64_t> observed_peak_{-1};
  std::atomic<std::int64_t> beyond_peak_{-1};
  std::atomic<bool> probing_{false};
};

// A backend's hold on its GPU's ledger, while it lives (DeviceLedger::attach).
class LedgerAttachment {
 public:
  explicit LedgerAttachment(DeviceLedger& ledger) : ledger_(ledger) { ledger_.attach(); }
  ~LedgerAttachment() { ledger_.detach(); }
  LedgerAttachment(const LedgerAttachment&) = delete;
  LedgerAttachment& operator=(const LedgerAttachment&) = delete;

 private:
  DeviceLedger& ledger_;
};

// The ledger of GPU `device` (an ordinal of this process), one a GPU for the whole process and
// never destroyed (arrays kept until the process exits are released into it).
DeviceLedger& device_ledger(int device);

}  // namespace blockmm::kernels::cuda
