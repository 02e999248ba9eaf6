// blockmm-gen: random COL380 input matrices for tests and benchmarks (tools/generator.hpp).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "core/thread_limit.hpp"
#include "tools/generator.hpp"
#include "tools/tool_main.hpp"

namespace {

const char* order_name(blockmm::tools::RecordOrder order) {
  switch (order) {
    case blockmm::tools::RecordOrder::sorted: return "sorted";
    case blockmm::tools::RecordOrder::reverse: return "reverse";
    default: return "shuffled";
  }
}

}  // namespace

int main(int argc, char** argv) {
  using blockmm::tools::RecordOrder;
  CLI::App app{"blockmm-gen: write a random COL380 input matrix (uint16 blocks).\n"
               "The file depends only on the options (not on --threads): the same seed gives the same bytes."};
  blockmm::tools::GenSpec spec;
  std::string out;
  std::int64_t k = -1;
  double density = -1;
  std::string order = "shuffled";
  int threads = 0;
  bool quiet = false;
  app.add_option("OUT", out, "output file (written to a temporary name, renamed when complete)")->required();
  app.add_option("--n", spec.n, "matrix order")->required();
  app.add_option("--m", spec.m, "block order (must divide n)")->required();
  auto* k_option = app.add_option("--k", k, "number of distinct blocks, 0 <= k <= (n/m)^2");
  auto* density_option = app.add_option("--density", density, "fraction of the (n/m)^2 blocks present: k = round(D * (n/m)^2)");
  k_option->excludes(density_option);
  density_option->excludes(k_option);
  app.add_option("--min-value", spec.min_value, "smallest value")->capture_default_str();
  app.add_option("--max-value", spec.max_value, "largest value (at most 65535)")->capture_default_str();
  app.add_option("--seed", spec.seed, "random seed")->capture_default_str();
  app.add_option("--order", order, "record order: shuffled (a seeded permutation), sorted (row-major) or reverse")
      ->check(CLI::IsMember({"shuffled", "sorted", "reverse"}))
      ->capture_default_str();
  app.add_option("--skew", spec.skew,
                 "power-law block-row skew: row i gets a share of k proportional to (i+1)^-ALPHA, capped at n/m "
                 "(0: even rows)")
      ->capture_default_str();
  app.add_option("--zero-blocks", spec.zero_blocks, "fraction of the k blocks that are all zero (the rest never are)")
      ->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads, at most 1024 (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", quiet, "no summary line");
  app.footer("Exit codes: 0 success, 2 usage, 4 output failure.");

  return blockmm::tools::run_tool("blockmm-gen", app, argc, argv, [&] {
    if (k_option->count() == 0 && density_option->count() == 0)
      throw blockmm::UsageError("give the number of blocks, --k K or --density D");
    if (spec.n > 0 && spec.m > 0 && spec.n % spec.m == 0) {
      const double p = static_cast<double>(spec.n / spec.m);
      if (density_option->count() > 0) {
        if (!(density >= 0 && density <= 1))
          throw blockmm::UsageError("--density " + std::to_string(density) + " must lie in [0, 1]");
        k = std::llround(density * p * p);
      }
    }
    spec.k = k;
    spec.order = order == "sorted" ? RecordOrder::sorted : order == "reverse" ? RecordOrder::reverse : RecordOrder::shuffled;
    blockmm::tools::check_spec(spec);
    if (spec.m > blockmm::kMaxSupportedBlockOrder)
      throw blockmm::UsageError("--m " + std::to_string(spec.m) + " exceeds the largest block order blockmm supports, " +
                                std::to_string(blockmm::kMaxSupportedBlockOrder) + " (a block of m*m uint16 values stays below 4 GiB)");
    blockmm::check_thread_count(threads, "--threads");
    if (threads == 0) blockmm::check_omp_num_threads_environment();
    if (threads > 0) omp_set_num_threads(threads);

    const auto start = std::chrono::steady_clock::now();
    const blockmm::tools::GenResult result = blockmm::tools::generate(spec, out);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!quiet) {
      const double p = static_cast<double>(spec.n / spec.m);
      std::printf("blockmm-gen: %s: n = %d, m = %d, k = %lld (density %.4g), values [%u, %u], seed %llu, %s, skew %g, "
                  "%lld all-zero blocks; %lld bytes in %.2f s\n",
                  out.c_str(), spec.n, spec.m, static_cast<long long>(spec.k), static_cast<double>(spec.k) / (p * p),
                  spec.min_value, spec.max_value, static_cast<unsigned long long>(spec.seed), order_name(spec.order),
                  spec.skew, static_cast<long long>(result.zero_blocks), static_cast<long long>(result.bytes), seconds);
    }
    return 0;
  });
}
