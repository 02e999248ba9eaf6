// The choice between the numeric phase's two paths on the GPU, the sparse tile kernels and the
// dense tiles on cuBLAS, from a small cost model: each path's time predicted from the block
// size, the lists the sparse matching walks (the block density), the block products (and so the
// products per output block) and the output's size, with the rates in one place (PathCosts,
// fitted to measured numeric phases). Pure C++, compiled in every build, so that its unit tests
// run where there is no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/sparse_plan.hpp"

namespace blockmm::kernels::cuda {

// What the choice sees of a panel's product.
struct PathProblem {
  std::int64_t n = 0;                 // matrix order
  std::int32_t m = 0;                 // block order
  // Block-rows the dense tiles span: from the panel's first row with output tiles to its last
  // (the dense path multiplies runs of consecutive rows, empty ones among them).
  std::int32_t dense_rows = 0;
  std::int64_t tiles = 0;             // output tiles
  std::int64_t block_products = 0;
  // List entries the sparse matching meets: over the tiles, the length of the A row plus that
  // of the B column it intersects (B's average column stands for each).
  double walk = 0;
  int dense_products = 3;             // int8 GEMM products an output element takes (1, 3, 4); 0: float64
};

// One sparse kernel's costs: a block product (its m^3 multiply-adds and its blocks' loads), and
// a list entry its matching meets.
struct SparseCosts {
  double block_product_seconds = 0;
  double walk_entry_seconds = 0;
};

// The model's constants, fitted to the bench machine's measured numeric phases.
struct PathCosts {
  SparseCosts fixed[6];                 // the CUDA-core tile kernels for m = 1, 2, 4, 8, 16, 32
  double generic_macs_per_second = 0;   // the generic kernel (any other m): its multiply-adds
  double generic_walk_entry_seconds = 0;  // ... and a list entry, per thread of a tile that walks it
  SparseCosts tensor_core[3];           // the tensor-core block kernel for m = 8, 16, 32
  double dense_int8_macs_per_second = 0;     // one int8 GEMM product's multiply-adds (cuBLAS)
  double dense_float64_macs_per_second = 0;
  double dense_tile_seconds = 0;             // gathering an output tile from the dense product
  double copy_back_bytes_per_second = 0;     // output records to the host: a floor for both paths
};
const PathCosts& measured_path_costs();

// The costs of the sparse kernel `kernel` runs for block size m.
SparseCosts sparse_costs(const PathCosts& costs, const SparseKernel& kernel, int m);

struct PathPrediction {
  double sparse_seconds = 0;
  double dense_seconds = 0;
};
PathPrediction predict_paths(const PathProblem& problem, const SparseKernel& kernel, const PathCosts& costs);

struct PathChoice {
  bool dense = false;
  bool forced = false;  // by the choices, or by what the dense path cannot take
  PathPrediction predicted;
};
// The faster predicted path (the sparse one on a tie), unless the choices force one; never the
// dense path for an empty product or an order it cannot take (kDenseMaxOrder).
PathChoice choose_path(const PathProblem& problem, const SparseKernel& kernel, const CudaChoices& choices,
                       const PathCosts& costs = measured_path_costs());

// The problem of a panel: `tile_row_ptr` its output tiles by block-row (rows + 1 entries),
// `a_row_ptr` A's blocks by the same rows, `b_blocks` all of B's blocks.
PathProblem path_problem(std::int64_t n, std::int32_t m, const std::vector<std::int64_t>& tile_row_ptr,
                         const std::int64_t* a_row_ptr, std::int64_t b_blocks, std::int64_t block_products);

// The problem as the work estimate before the symbolic phase sees it (uniform density: every
// row's and column's list of sqrt(block_products / rows) blocks), for preparing cuBLAS early.
PathProblem estimated_path_problem(std::int64_t n, std::int32_t m, std::int32_t rows, std::int64_t block_products);

// For the run's device line: "predicted: sparse 0.57 s, dense 1.24 s".
std::string describe(const PathPrediction& predicted);

}  // namespace blockmm::kernels::cuda
