// The OpenMP backend: exact symbolic phase from block masks (bitsets for dense rows),
// Gustavson numeric phase with saturating uint32 accumulators, output streamed in chunks
// while the previous chunk is written.
#pragma once

#include <memory>

#include "core/large_buffer.hpp"
#include "kernels/backend.hpp"

namespace blockmm::kernels {

// The numeric phase's two chunk buffers, kept by the backend from one numeric call to the next
// and released with it. A call's own buffers would be faulted in and unmapped on every call (on
// 4 KiB pages, while the team's threads wait), a large share of a small case's phase, and ranks
// that share rows make up to three calls. Contents carry nothing from call to call.
struct CpuNumericWorkspace {
  LargeVector<std::byte> chunk_buffers[2];
};

// The two phases over host operands (kernels/host_operands.hpp builds them). Without a
// workspace, the numeric phase allocates its buffers for the call.
TilePattern cpu_symbolic(const Operands& operands);
NumericReport cpu_numeric(const Operands& operands, const TilePattern& pattern, RecordSink& sink,
                          const NumericOptions& options, CpuNumericWorkspace* workspace = nullptr);

}  // namespace blockmm::kernels
