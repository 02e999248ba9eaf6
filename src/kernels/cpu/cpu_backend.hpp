// The OpenMP backend: exact symbolic phase from block masks (bitsets for dense rows),
// Gustavson numeric phase with saturating uint32 accumulators, output streamed in chunks
// while the previous chunk is written.
#pragma once

#include <memory>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

std::unique_ptr<Backend> make_cpu_backend(int threads);

// The two phases. The cuda backend runs cpu_symbolic on the host too (it overlaps the upload).
TilePattern cpu_symbolic(const Operands& operands);
NumericReport cpu_numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                          const NumericOptions& options);

}  // namespace blockmm::kernels
