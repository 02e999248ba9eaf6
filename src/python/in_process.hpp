// python: blockmm's product inside a Python process, for the blockmm package's multiply() (the
// extension module blockmm._native, extension.cpp, is the one file here that knows CPython). The
// operands are scipy BSR arrays read where they lie (arrays.hpp), the product goes into arrays
// allocated once at their final size, the team is chosen as the driver chooses it (src/backends:
// every GPU of the machine where the product repays it), the process is one rank that never
// starts MPI, and a cancellation (Ctrl-C) is checked between phases and chunks.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "kernels/backend.hpp"
#include "multiply/report.hpp"
#include "python/arrays.hpp"
#include "python/cancellation.hpp"

namespace blockmm::python {

struct ProductRequest {
  std::optional<kernels::BackendKind> backend;  // none: auto
  int threads = 0;                    // 0: the process's OpenMP default
  int gpus = 0;                       // 0: every GPU, or one for a small product
  std::int64_t memory_budget = 0;     // device bytes a GPU may use; 0: automatic
  std::int64_t chunk_bytes = std::int64_t{256} << 20;
};

// C = A x B into arrays that `allocate` makes once the block count is known. Products of one
// process run one at a time (the GPUs' team is the process's). Throws blockmm::Error with the
// command line's message and exit code (InputError for bad arrays, OutOfMemoryError for memory,
// ResourceError for a GPU, UsageError for a malformed BLOCKMM_* variable); after a cancellation,
// whatever it threw, cancellation.requested() is true. A failure that may have broken the kept
// GPUs' team drops it (backends::drop_teams_after_failure). The process's OpenMP thread count is
// left as it was.
multiply::Report multiply_arrays(ArrayInputFile& a, ArrayInputFile& b, const ProductRequest& request,
                                 const AllocateOutput& allocate, const Cancellation& cancellation);

// What a failed product raises in Python, told by the exception's type, never its text
// (docs/python.md): ValueError for what the caller gave (UsageError, InputError: bad arrays or
// options, a malformed BLOCKMM_* variable); MemoryError for memory (OutOfMemoryError: an
// allocation refused, a budget too small for the product; std::bad_alloc; ENOMEM); RuntimeError
// for the rest (no usable GPU, a GPU's failure, a thread that cannot start, an internal error).
enum class FailureKind { value, memory, runtime };
struct Failure {
  FailureKind kind = FailureKind::runtime;
  std::string message;
};
Failure describe_failure(const std::exception_ptr& error);

// GPUs the process's CUDA sees (starting CUDA's driver, as a product that may take a GPU does);
// 0 without a GPU or in a build without CUDA.
int visible_gpus();

}  // namespace blockmm::python
