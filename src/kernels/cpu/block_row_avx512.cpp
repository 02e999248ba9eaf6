// The AVX-512 block kernel without IFMA (vpmuludq + vpaddq); compiled with -mavx512f/bw/vl.
#include "kernels/cpu/avx512_lanes.hpp"
#include "kernels/cpu/simd_block_row.hpp"

namespace blockmm::kernels::cpu {

BlockRowKernel avx512_block_row_kernel(std::int32_t m) {
  return m <= 4 ? simd::block_row_table<YmmLanes<false>>(m) : simd::block_row_table<ZmmLanes<false>>(m);
}

}  // namespace blockmm::kernels::cpu
