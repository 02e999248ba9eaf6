// In-process single-rank product through the real partition and kernel code, for unit tests.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <thread>

#include "core/block_matrix.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda_start.hpp"

namespace blockmm::testing {

struct ProductRun {
  OutputLayout layout;  // the symbolic phase's tiles per row
  std::int64_t block_products = 0;
  OutputRecords output;  // records in the order the backend emitted them
  std::int64_t chunks = 0;
  std::string device;  // the backend's description of where it ran (NumericReport::device)
  std::set<std::thread::id> writer_threads;  // the threads that called the sink's write()
  kernels::BackendCounters counters;         // the backend's, after the product
};

// C = A x B on one rank with `kind`; chunk_bytes small values force many chunks.
// `cuda` pins the choices the cuda backend would otherwise make (dense path, encoding, build).
ProductRun multiply(const InputRecords& a, const InputRecords& b, kernels::BackendKind kind,
                    std::int64_t chunk_bytes = std::int64_t{256} << 20, std::int64_t device_budget = 0,
                    const kernels::CudaChoices& cuda = {});

// A backend of `kind` as blockmm makes it (cuda: on device 0, through one CudaStart a process).
std::unique_ptr<kernels::Backend> make_test_backend(kernels::BackendKind kind, std::int64_t device_budget = 0,
                                                    const kernels::CudaChoices& cuda = {});

// True if records are sorted by (i, j) with no repeats.
bool sorted_unique(const OutputRecords& records);

}  // namespace blockmm::testing
