// The byte-plane block kernels on AVX-512 BW (vpmaddwd + vpaddd); compiled with -mavx512f/bw/vl.
#include "kernels/cpu/avx512_planes.hpp"

namespace blockmm::kernels::cpu {

BlockRowKernel avx512_planes_block_row_kernel(std::int32_t m) { return Planes512<false>::kernel(m); }

RowKernel avx512_planes_row_kernel(std::int32_t m) { return Planes512<false>::row_kernel(m); }

BlockRowKernel avx512_planes_padded_kernel(std::int32_t m) { return Planes512<false>::padded_kernel(m); }

}  // namespace blockmm::kernels::cpu
