// cpu_numeric with an explicit block-kernel level (cpu_numeric itself runs the best one), so
// that tests can run the whole numeric phase at every level the CPU supports.
#pragma once

#include "kernels/backend.hpp"
#include "kernels/cpu/block_kernels.hpp"
#include "kernels/cpu/cpu_backend.hpp"

namespace blockmm::kernels {

NumericReport cpu_numeric_at_level(cpu::SimdLevel level, const Operands& operands, const TilePattern& pattern,
                                   RecordSink& sink, const NumericOptions& options,
                                   CpuNumericWorkspace* workspace = nullptr);

}  // namespace blockmm::kernels
