// The portable block kernel (plain C++ at the build's baseline instruction set: the only one
// off x86) and the run-time choice between the levels.
#include "kernels/cpu/block_kernels.hpp"

#include <stdexcept>

#include "kernels/cpu/block_mac.hpp"
#include "kernels/cpu/byte_planes.hpp"

namespace blockmm::kernels::cpu {
namespace {

template <int M>
void portable_block_row(const BlockRowTask& task) {
  const std::int32_t m = M > 0 ? M : task.m;
  const std::int64_t mm = std::int64_t{m} * m;
  const std::uint16_t* b = task.b_values;
  for (std::int64_t f = 0; f < task.count; ++f, b += mm) {
    const std::int32_t s = task.slot[task.b_col[f]];
    if (s < 0) continue;  // no output tile here (the masks of this pair are disjoint)
    if constexpr (M > 0)
      block_mac_fixed<M>(task.acc + s * task.acc_stride, task.a, b);
    else
      block_mac_any(task.acc + s * task.acc_stride, task.a, b, m);
  }
}

bool cpu_has(SimdLevel level) {
#if defined(BLOCKMM_X86_KERNELS)
  __builtin_cpu_init();
  // libgcc's and compiler-rt's feature bits include the OS check (XGETBV) for AVX and AVX-512 state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  switch (level) {
    case SimdLevel::portable: return true;
    case SimdLevel::avx2:
    case SimdLevel::avx2_planes: return __builtin_cpu_supports("avx2");
    case SimdLevel::avx512: return avx512;
    case SimdLevel::avx512_ifma: return avx512 && __builtin_cpu_supports("avx512ifma");
    case SimdLevel::avx512_planes: return avx512;
    case SimdLevel::avx512_vnni: return avx512 && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return level == SimdLevel::portable;
#endif
}

}  // namespace

BlockRowKernel portable_block_row_kernel(std::int32_t m) {
  switch (m) {
    case 1: return portable_block_row<1>;
    case 2: return portable_block_row<2>;
    case 4: return portable_block_row<4>;
    case 8: return portable_block_row<8>;
    case 16: return portable_block_row<16>;
    case 32: return portable_block_row<32>;
    default: return portable_block_row<0>;
  }
}

namespace {
bool tile_lanes(std::int32_t m) { return m >= 2 && m <= 7 && m != 4; }
bool row_strips(std::int32_t m) { return m >= 9 && m <= planes::kMaxBlock; }
bool padded_level(SimdLevel level) { return level == SimdLevel::avx512_planes || level == SimdLevel::avx512_vnni; }
}  // namespace

std::int64_t padded_row_stride(SimdLevel level, std::int32_t m) {
  if (!padded_level(level)) return 0;
  return tile_lanes(m) ? m : row_strips(m) ? 16 * ((std::int64_t{m} + 15) / 16) : 0;
}

std::int64_t padded_accumulator_stride(SimdLevel level, std::int32_t m) {
  if (!padded_level(level)) return 0;
  if (tile_lanes(m)) return 16 * ((std::int64_t{m} * m + 15) / 16);
  return m * padded_row_stride(level, m);
}

BlockRowKernel padded_block_row_kernel(SimdLevel level, std::int32_t m) {
  if (padded_accumulator_stride(level, m) == 0 || !cpu_has(level)) return nullptr;
#if defined(BLOCKMM_X86_KERNELS)
  return level == SimdLevel::avx512_vnni ? avx512_vnni_padded_kernel(m) : avx512_planes_padded_kernel(m);
#else
  return nullptr;
#endif
}

RowKernel row_kernel(SimdLevel level, std::int32_t m) {
  if (!tile_lanes(m) || padded_accumulator_stride(level, m) == 0 || !cpu_has(level)) return nullptr;
#if defined(BLOCKMM_X86_KERNELS)
  return level == SimdLevel::avx512_vnni ? avx512_vnni_row_kernel(m) : avx512_planes_row_kernel(m);
#else
  return nullptr;
#endif
}

std::string to_string(SimdLevel level) {
  switch (level) {
    case SimdLevel::portable: return "portable";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx2_planes: return "avx2-planes";
    case SimdLevel::avx512: return "avx512";
    case SimdLevel::avx512_ifma: return "avx512-ifma";
    case SimdLevel::avx512_planes: return "avx512-planes";
    case SimdLevel::avx512_vnni: return "avx512-vnni";
  }
  return "unknown";
}

bool simd_level_available(SimdLevel level) { return cpu_has(level); }

SimdLevel best_simd_level() {
  static const SimdLevel best = [] {
    // Fastest first, as measured: the byte planes beat the widened form on every instruction set
    // (more useful multiply-adds an instruction), VNNI's fused multiply-add beats vpmaddwd + vpaddd.
    for (SimdLevel level : {SimdLevel::avx512_vnni, SimdLevel::avx512_planes, SimdLevel::avx512_ifma,
                            SimdLevel::avx512, SimdLevel::avx2_planes})
      if (cpu_has(level)) return level;
    return SimdLevel::portable;
  }();
  return best;
}

BlockRowKernel block_row_kernel(SimdLevel level, std::int32_t m) {
  if (m < 1) throw std::invalid_argument("block_row_kernel: block size " + std::to_string(m));
  if (!cpu_has(level)) throw std::invalid_argument("block_row_kernel: " + to_string(level) + " is not available here");
  // m = 1: one multiply-add a block pair; the scalar loop beats any vector layout.
  if (m == 1 || level == SimdLevel::portable) return portable_block_row_kernel(m);
#if defined(BLOCKMM_X86_KERNELS)
  switch (level) {
    case SimdLevel::avx2: return avx2_block_row_kernel(m);
    case SimdLevel::avx2_planes:
      return m <= planes::kMaxBlock ? avx2_planes_block_row_kernel(m) : avx2_block_row_kernel(m);
    case SimdLevel::avx512: return avx512_block_row_kernel(m);
    case SimdLevel::avx512_ifma: return avx512_ifma_block_row_kernel(m);
    case SimdLevel::avx512_planes:
      return m <= planes::kMaxBlock ? avx512_planes_block_row_kernel(m) : avx512_block_row_kernel(m);
    case SimdLevel::avx512_vnni:
      return m <= planes::kMaxBlock ? avx512_vnni_block_row_kernel(m) : avx512_block_row_kernel(m);
    case SimdLevel::portable: break;
  }
#endif
  return portable_block_row_kernel(m);
}

}  // namespace blockmm::kernels::cpu
