// The cpu numeric phase alone, at every block-kernel level this CPU supports: reads two COL380
// inputs, builds the operands and the tile pattern (the least CPU and wall time of `repeats`
// builds and symbolic phases is reported), then runs cpu_numeric_at_level into a sink that
// discards the records (no output I/O) and reports per level the wall time, the process CPU time
// of the phase and the useful GMAC/s per core, both by wall time x threads and by CPU time (the
// latter is what a core delivers while it runs, on a machine shared with other work).
// Usage: cpu_kernel_bench A.bin B.bin [repeats [level ...]]   (threads: OMP_NUM_THREADS; levels
// by name, e.g. avx2 avx2-planes: only those, in the order given, alternating per repeat; none:
// no numeric phase)
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/block_kernels.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/numeric_level.hpp"
#include "operands/host_build.hpp"

namespace {

blockmm::InputRecords read_col380(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::int32_t header[3];
  if (!in || !in.read(reinterpret_cast<char*>(header), sizeof header)) throw std::runtime_error(std::string(path) + ": unreadable");
  blockmm::InputRecords r;
  r.shape = {header[0], header[1]};
  if (r.shape.m < 1 || r.shape.n < r.shape.m || r.shape.n % r.shape.m != 0 || header[2] < 0)
    throw std::runtime_error(std::string(path) + ": bad header");
  r.bytes.resize(static_cast<std::size_t>(header[2] * r.stride()));
  if (!in.read(reinterpret_cast<char*>(r.bytes.data()), static_cast<std::streamsize>(r.bytes.size())))
    throw std::runtime_error(std::string(path) + ": truncated");
  return r;
}

class DiscardSink final : public blockmm::RecordSink {
 public:
  void write(std::int64_t, std::int64_t, const std::byte*) override {}
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace blockmm;
  if (argc < 3) {
    std::fprintf(stderr, "usage: cpu_kernel_bench A.bin B.bin [repeats [level ...]]\n");
    return 2;
  }
  try {
    const int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
    const InputRecords a = read_col380(argv[1]);
    const InputRecords b = read_col380(argv[2]);
    if (a.shape != b.shape) throw std::runtime_error("A and B differ in n or m");
    const std::int32_t p = a.shape.block_rows();
    auto dup = [](std::int32_t i, std::int32_t j) { return "duplicate block (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };
    // The build and the symbolic phase too, in CPU time (the least of `repeats`).
    double build_cpu = 1e30, symbolic_cpu = 1e30, build_wall = 1e30, symbolic_wall = 1e30;
    BlockMatrix am, bm;
    TilePattern pattern;
    for (int rep = 0; rep < std::max(1, repeats); ++rep) {
      const double cpu0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      am = operands::build_block_matrix(a, 0, p, operands::OperandRole::left, dup);
      bm = operands::build_block_matrix(b, 0, p, operands::OperandRole::right, dup, false);
      const double cpu1 = cpu_seconds();
      const auto t1 = std::chrono::steady_clock::now();
      pattern = kernels::cpu_symbolic({am, bm});
      build_cpu = std::min(build_cpu, cpu1 - cpu0);
      symbolic_cpu = std::min(symbolic_cpu, cpu_seconds() - cpu1);
      build_wall = std::min(build_wall, std::chrono::duration<double>(t1 - t0).count());
      const auto t2 = std::chrono::steady_clock::now();
      symbolic_wall = std::min(symbolic_wall, std::chrono::duration<double>(t2 - t1).count());
    }
    const kernels::Operands ops{am, bm};
    std::printf("build cpu %.3f s  symbolic cpu %.3f s  (wall %.3f s, %.3f s)\n", build_cpu, symbolic_cpu, build_wall,
                symbolic_wall);
    const double macs = static_cast<double>(operands::count_block_products(ops.a, ops.b)) * a.shape.m * a.shape.m * a.shape.m;
    const int threads = omp_get_max_threads();
    std::printf("n=%d m=%d tiles=%lld useful_macs=%.4g threads=%d\n", a.shape.n, a.shape.m,
                static_cast<long long>(pattern.tiles()), macs, threads);
    std::vector<kernels::cpu::SimdLevel> levels;
    bool phases_only = false;  // level "none": the build and the symbolic phase alone
    for (int q = 4; q < argc; ++q) {
      if (std::string(argv[q]) == "none") {
        phases_only = true;
        continue;
      }
      bool known = false;
      for (kernels::cpu::SimdLevel level : kernels::cpu::kAllSimdLevels)
        if (kernels::cpu::to_string(level) == argv[q]) {
          levels.push_back(level);
          known = true;
        }
      if (!known) throw std::runtime_error(std::string("unknown level ") + argv[q]);
    }
    if (phases_only) return 0;
    // All levels one after another by default; named levels alternate, a round of each per repeat.
    const bool alternate = !levels.empty();
    if (levels.empty()) levels.assign(std::begin(kernels::cpu::kAllSimdLevels), std::end(kernels::cpu::kAllSimdLevels));
    // The chunk buffers kept from one run to the next, as the backend keeps them: a run's own
    // buffers would put their page faults into every figure.
    kernels::CpuNumericWorkspace workspace;
    auto run_once = [&](kernels::cpu::SimdLevel level) {
      DiscardSink sink;
      const double cpu0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      const kernels::NumericReport report = kernels::cpu_numeric_at_level(level, ops, pattern, sink, {}, &workspace);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = cpu_seconds() - cpu0;
      std::printf("%-12s wall %.3f s  cpu %.3f s  GMAC/s per core: %.2f (wall x threads), %.2f (cpu time)\n",
                  kernels::cpu::to_string(level).c_str(), wall, cpu, macs / wall / threads / 1e9, macs / cpu / 1e9);
      (void)report;
    };
    for (kernels::cpu::SimdLevel level : levels)
      if (!kernels::cpu::simd_level_available(level)) std::printf("%-12s not available here\n", kernels::cpu::to_string(level).c_str());
    if (alternate) {
      for (int rep = 0; rep < repeats; ++rep)
        for (kernels::cpu::SimdLevel level : levels)
          if (kernels::cpu::simd_level_available(level)) run_once(level);
    } else {
      for (kernels::cpu::SimdLevel level : levels)
        if (kernels::cpu::simd_level_available(level))
          for (int rep = 0; rep < repeats; ++rep) run_once(level);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_kernel_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
