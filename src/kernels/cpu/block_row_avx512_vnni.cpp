// The byte-plane block kernels with AVX-512 VNNI (vpdpwssd); compiled with -mavx512f/bw/vl/vnni.
#include "kernels/cpu/avx512_planes.hpp"

namespace blockmm::kernels::cpu {

BlockRowKernel avx512_vnni_block_row_kernel(std::int32_t m) { return Planes512<true>::kernel(m); }

RowKernel avx512_vnni_row_kernel(std::int32_t m) { return Planes512<true>::row_kernel(m); }

BlockRowKernel avx512_vnni_padded_kernel(std::int32_t m) { return Planes512<true>::padded_kernel(m); }

}  // namespace blockmm::kernels::cpu
