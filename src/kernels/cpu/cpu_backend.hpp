// The OpenMP backend: exact symbolic phase from block masks (bitsets for dense rows),
// Gustavson numeric phase with saturating uint32 accumulators, output streamed in chunks
// while the previous chunk is written.
#pragma once

#include <memory>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

std::unique_ptr<Backend> make_cpu_backend(int threads);

// The two phases over host operands (kernels/host_operands.hpp builds them).
TilePattern cpu_symbolic(const Operands& operands);
NumericReport cpu_numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                          const NumericOptions& options);

}  // namespace blockmm::kernels
