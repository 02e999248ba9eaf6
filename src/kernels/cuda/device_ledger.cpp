#include "kernels/cuda/device_ledger.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "core/block_matrix.hpp"
#include "core/record_layout.hpp"
#include "kernels/cuda/sparse_plan.hpp"

namespace blockmm::kernels::cuda {
namespace {

std::int64_t round_up(std::int64_t bytes, std::int64_t unit) { return (bytes + unit - 1) / unit * unit; }

void raise_to(std::atomic<std::int64_t>& peak, std::int64_t value) {
  std::int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

std::int64_t allocation_footprint(std::int64_t bytes) {
  if (bytes <= 0) return 0;
  return bytes <= kSmallArray ? round_up(bytes, 512) : round_up(bytes, kLargePage);
}

std::int64_t numeric_minimum_bytes(std::int32_t m) {
  return 4 * std::int64_t{kThreadsPerUnit} * record_bytes<std::uint32_t>(m) + page_slack(kSparsePathBuffers) + 8 * kMiB;
}

std::int64_t operand_device_bytes(std::int64_t records, std::int32_t m, std::int32_t rows, std::int32_t p, bool right) {
  const std::int64_t n = records;
  const auto fp = allocation_footprint;
  const std::int64_t left = fp(4 * (std::int64_t{rows} + 1)) + fp(4 * n) + fp(2 * std::int64_t{m} * m * n) +
                            fp(8 * std::int64_t{mask_words(m)} * n);
  return left + (right ? fp(4 * (std::int64_t{p} + 1)) + 2 * fp(4 * n) : 0);
}

std::int64_t pattern_device_bytes(std::int64_t tiles, std::int32_t rows) {
  return allocation_footprint(8 * (std::int64_t{rows} + 1)) + allocation_footprint(4 * tiles);
}

std::int64_t device_build_peak_bytes(std::int64_t records, std::int32_t m, std::int32_t rows, std::int32_t p, bool right) {
  const std::int64_t n = records;
  const auto fp = allocation_footprint;
  // Records, keys and indices (each twice: the sort's two buffers), zero flags, the two check
  // flags, kept flags and positions, each kept block's source and row; CUB's scratch (radix sort,
  // scans) at most a byte a record and 2 MiB.
  const std::int64_t sort = fp(n * record_bytes<std::uint16_t>(m)) + 2 * fp(8 * n) + 2 * fp(4 * n) + fp(n) + fp(16) +
                            fp(4 * n) + fp(4 * (n + 1)) + 2 * fp(4 * n) + fp(n + 2 * kMiB);
  // The right operand's CSC: keys twice, entries twice (one of them becomes the operand's), and
  // each column's count.
  const std::int64_t csc = right ? 2 * fp(8 * n) + fp(4 * n) + fp(4 * std::int64_t{p}) : 0;
  return sort + csc + operand_device_bytes(records, m, rows, p, right);
}

std::int64_t cublas_workspace_bytes(std::int64_t room) {
  return std::clamp(std::max<std::int64_t>(0, room) / 16 / 256 * 256, kCublasWorkspaceMin, kCublasWorkspaceMax);
}

void DeviceLedger::charge(std::int64_t bytes) {
  const std::int64_t arrays = arrays_ += bytes;
  raise_to(peak_, arrays + reserved_.load());
}

void DeviceLedger::release(std::int64_t bytes) { arrays_ -= bytes; }

void DeviceLedger::attach() {
  if (backends_++ == 0) {
    const std::int64_t reserved = reserved_ += kUncountedReserve;
    raise_to(peak_, arrays_.load() + reserved);
  }
}

void DeviceLedger::detach() {
  if (--backends_ == 0) reserved_ -= kUncountedReserve;
}

void DeviceLedger::baseline(std::int64_t free_bytes) {
  std::int64_t unset = -1;
  baseline_.compare_exchange_strong(unset, free_bytes);
}

void DeviceLedger::observe(std::int64_t free_bytes) {
  const std::int64_t base = baseline_.load();
  if (base < 0) return;
  const std::int64_t used = base - free_bytes;
  last_used_ = used;
  raise_to(observed_peak_, used);
  raise_to(beyond_peak_, used - arrays_.load());
}

void DeviceLedger::restart_peaks() {
  peak_ = held();
  const std::int64_t used = last_used_.load();
  observed_peak_ = used;
  beyond_peak_ = used < 0 ? -1 : used - arrays_.load();
}

DeviceLedger& device_ledger(int device) {
  // Never destroyed: arrays that live until the process ends are released into it.
  static auto* const lock = new std::mutex;
  static auto* const ledgers = new std::map<int, std::unique_ptr<DeviceLedger>>;
  const std::lock_guard<std::mutex> hold(*lock);
  std::unique_ptr<DeviceLedger>& ledger = (*ledgers)[device];
  if (!ledger) ledger = std::make_unique<DeviceLedger>();
  return *ledger;
}

}  // namespace blockmm::kernels::cuda
