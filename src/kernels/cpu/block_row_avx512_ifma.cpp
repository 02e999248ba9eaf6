// The AVX-512 IFMA block kernel (vpmadd52luq: one instruction a multiply-add of 8 lanes);
// compiled with -mavx512f/bw/vl/ifma.
#include "kernels/cpu/avx512_lanes.hpp"
#include "kernels/cpu/simd_block_row.hpp"

namespace blockmm::kernels::cpu {

BlockRowKernel avx512_ifma_block_row_kernel(std::int32_t m) {
  return m <= 4 ? simd::block_row_table<YmmLanes<true>>(m) : simd::block_row_table<ZmmLanes<true>>(m);
}

}  // namespace blockmm::kernels::cpu
