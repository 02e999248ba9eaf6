#include "kernels/cuda/path_choice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/record_layout.hpp"
#include "kernels/cuda/dense_plan.hpp"

namespace blockmm::kernels::cuda {

const PathCosts& measured_path_costs() {
  // Fitted to the bench machine's measured numeric phases, one rate a term of the model (the
  // tensor-core kernel's partly predicted, below).
  static const PathCosts costs = [] {
    PathCosts c;
    c.fixed[0] = {1.0e-11, 7.7e-12};   // m = 1
    c.fixed[1] = {1.2e-11, 7.7e-12};   // m = 2
    c.fixed[2] = {2.19e-11, 7.7e-12};  // m = 4
    c.fixed[3] = {8.77e-11, 1.47e-11};  // m = 8
    c.fixed[4] = {2.56e-9, 2.0e-11};   // m = 16
    c.fixed[5] = {3.0e-8, 4.0e-11};    // m = 32
    // The tensor-core block kernel: a block product's m^3 useful multiply-adds at its rate, and a
    // B column's entry scanned 32 at a time against the A row's bitmap. m = 8 is fitted to its
    // measured numeric phases; m = 16 and 32 are predicted from the kernel's instruction and load
    // counts until measured.
    c.tensor_core[0] = {512 / 1.17e13, 1.7e-12};
    c.tensor_core[1] = {4096 / 4.0e13, 1.0e-12};
    c.tensor_core[2] = {32768 / 5.0e13, 4.0e-12};
    c.generic_macs_per_second = 1.0e12;
    c.generic_walk_entry_seconds = 2.5e-12;
    c.dense_int8_macs_per_second = 7.0e14;
    c.dense_float64_macs_per_second = 2.9e13;
    c.dense_tile_seconds = 2.05e-9;
    c.copy_back_bytes_per_second = 3.0e10;
    return c;
  }();
  return costs;
}

SparseCosts sparse_costs(const PathCosts& costs, const SparseKernel& kernel, int m) {
  if (kernel.tensor_cores && tensor_core_block_size(m)) return costs.tensor_core[m == 8 ? 0 : m == 16 ? 1 : 2];
  if (!kernel.generic) {
    switch (m) {
      case 1: return costs.fixed[0];
      case 2: return costs.fixed[1];
      case 4: return costs.fixed[2];
      case 8: return costs.fixed[3];
      case 16: return costs.fixed[4];
      case 32: return costs.fixed[5];
      default: break;
    }
  }
  const double mm = m;
  return {mm * mm * mm / costs.generic_macs_per_second, costs.generic_walk_entry_seconds * generic_threads_per_tile(m)};
}

PathPrediction predict_paths(const PathProblem& problem, const SparseKernel& kernel, const PathCosts& costs) {
  const double m = problem.m, n = static_cast<double>(problem.n), tiles = static_cast<double>(problem.tiles);
  // Both paths stream the same records back to the host, overlapped with their kernels.
  const double output = tiles * static_cast<double>(record_bytes<std::uint32_t>(problem.m)) / costs.copy_back_bytes_per_second;
  const SparseCosts sparse = sparse_costs(costs, kernel, problem.m);
  const double sparse_compute =
      static_cast<double>(problem.block_products) * sparse.block_product_seconds + problem.walk * sparse.walk_entry_seconds;
  // The dense tiles: the rows they span against all of B, one GEMM product each for the int8
  // encoding's planes (or one float64 product), then each tile gathered.
  const double dense_macs = static_cast<double>(problem.dense_rows) * m * n * n;
  const double dense_compute = (problem.dense_products > 0
                                    ? problem.dense_products * dense_macs / costs.dense_int8_macs_per_second
                                    : dense_macs / costs.dense_float64_macs_per_second) +
                               tiles * costs.dense_tile_seconds;
  return {std::max(sparse_compute, output), std::max(dense_compute, output)};
}

PathChoice choose_path(const PathProblem& problem, const SparseKernel& kernel, const CudaChoices& choices,
                       const PathCosts& costs) {
  PathChoice choice;
  choice.predicted = predict_paths(problem, kernel, costs);
  if (problem.n >= kDenseMaxOrder || problem.tiles == 0 || choices.dense != CudaChoices::Dense::automatic) {
    choice.forced = true;
    choice.dense = problem.n < kDenseMaxOrder && problem.tiles > 0 && choices.dense == CudaChoices::Dense::always;
    return choice;
  }
  choice.dense = choice.predicted.dense_seconds < choice.predicted.sparse_seconds;
  return choice;
}

PathProblem path_problem(std::int64_t n, std::int32_t m, const std::vector<std::int64_t>& tile_row_ptr,
                         const std::int64_t* a_row_ptr, std::int64_t b_blocks, std::int64_t block_products) {
  PathProblem problem;
  problem.n = n;
  problem.m = m;
  problem.block_products = block_products;
  problem.tiles = tile_row_ptr.empty() ? 0 : tile_row_ptr.back();
  const std::int64_t p = m > 0 ? n / m : 0;
  const double b_column = p > 0 ? static_cast<double>(b_blocks) / static_cast<double>(p) : 0;
  std::int64_t first = -1, last = -1;  // rows with tiles
  for (std::size_t r = 0; r + 1 < tile_row_ptr.size(); ++r) {
    const std::int64_t tiles = tile_row_ptr[r + 1] - tile_row_ptr[r];
    if (tiles == 0) continue;
    if (first < 0) first = static_cast<std::int64_t>(r);
    last = static_cast<std::int64_t>(r);
    problem.walk += static_cast<double>(tiles) * (static_cast<double>(a_row_ptr[r + 1] - a_row_ptr[r]) + b_column);
  }
  problem.dense_rows = first < 0 ? 0 : static_cast<std::int32_t>(last - first + 1);
  return problem;
}

PathProblem estimated_path_problem(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products) {
  PathProblem problem;
  problem.n = n;
  problem.m = m;
  problem.dense_rows = rows;
  problem.block_products = block_products;
  const double p = m > 0 ? static_cast<double>(n / m) : 0;
  const double per_row = rows > 0 ? static_cast<double>(block_products) / rows : 0;  // = (density p)^2 p
  const double list = std::sqrt(per_row);                                            // density p
  // Each of the row's p tiles is non-empty with probability 1 - exp(-products per tile).
  const double tiles = rows * p * (p > 0 ? -std::expm1(-per_row / p) : 0);
  problem.tiles = static_cast<std::int64_t>(tiles);
  problem.walk = tiles * 2 * list;
  problem.dense_products = 3;  // the values are not known yet: the split planes (values up to 4222)
  return problem;
}

std::string describe(const PathPrediction& predicted) {
  char text[96];
  std::snprintf(text, sizeof text, "predicted: sparse %.3g s, dense %.3g s", predicted.sparse_seconds,
                predicted.dense_seconds);
  return text;
}

}  // namespace blockmm::kernels::cuda
