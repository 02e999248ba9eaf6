// The choice between the GPU's sparse and dense numeric paths (kernels/cuda/path_choice.hpp):
// its predictions reproduce the measurements its constants come from, it takes the faster path
// on issue 40's four 5 % cases (where the old rule, a fixed 5 % of a dense product's work, took
// the slower one at m = 4), choices force a path, and the dense path never runs where it cannot.
// Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/record_layout.hpp"
#include "kernels/cuda/dense_plan.hpp"
#include "kernels/cuda/path_choice.hpp"

namespace blockmm::kernels::cuda {
namespace {

// Issue 40's cases: n 65 536, 5 % of the blocks in both operands (uniform), values up to 1023
// (the split planes: three int8 products), 0.70e12 useful multiply-adds and a 17 GB product.
PathProblem five_percent_case(std::int32_t m) {
  PathProblem problem;
  problem.n = 65536;
  problem.m = m;
  const std::int64_t p = problem.n / m;
  problem.dense_rows = static_cast<std::int32_t>(p);
  problem.block_products = static_cast<std::int64_t>(0.70e12 / (double(m) * m * m));
  problem.tiles = static_cast<std::int64_t>(17e9 / double(record_bytes<std::uint32_t>(m)));
  problem.walk = double(problem.tiles) * 2 * 0.05 * double(p);
  problem.dense_products = 3;
  return problem;
}

struct Measured {
  std::int32_t m;
  double sparse, dense;  // numeric phase, seconds (issue 40, one H200)
};
const Measured kIssue40[] = {{4, 3.22, 1.69}, {8, 0.89, 1.29}, {16, 0.57, 1.24}, {32, 0.66, 1.26}};

TEST(PathChoice, PredictionsReproduceTheMeasuredFivePercentCases) {
  for (const Measured& c : kIssue40) {
    const PathProblem problem = five_percent_case(c.m);
    const PathPrediction predicted = predict_paths(problem, sparse_kernel_for(c.m, false), measured_path_costs());
    EXPECT_NEAR(predicted.sparse_seconds, c.sparse, 0.1 * c.sparse) << "m=" << c.m;
    EXPECT_NEAR(predicted.dense_seconds, c.dense, 0.1 * c.dense) << "m=" << c.m;
  }
}

TEST(PathChoice, TakesTheFasterPathOnEachFivePercentCase) {
  const CudaChoices automatic;
  for (const Measured& c : kIssue40) {
    const PathChoice choice = choose_path(five_percent_case(c.m), sparse_kernel_for(c.m, false), automatic);
    EXPECT_EQ(choice.dense, c.dense < c.sparse) << "m=" << c.m;
    EXPECT_FALSE(choice.forced);
    // The tensor-core block kernel (m = 8, 16, 32; predicted faster than the CUDA-core one)
    // keeps the same choices.
    const SparseKernel tensor = sparse_kernel_for(c.m, false, true);
    EXPECT_EQ(choose_path(five_percent_case(c.m), tensor, automatic).dense, c.dense < c.sparse) << "m=" << c.m;
    if (tensor.tensor_cores) {
      EXPECT_LE(predict_paths(five_percent_case(c.m), tensor, measured_path_costs()).sparse_seconds,
                predict_paths(five_percent_case(c.m), sparse_kernel_for(c.m, false), measured_path_costs()).sparse_seconds);
    }
  }
}

TEST(PathChoice, ChoicesForceAPathButNeverTheDenseOneWhereItCannotRun) {
  PathProblem problem = five_percent_case(8);
  const SparseKernel kernel = sparse_kernel_for(8, false);
  CudaChoices always, never;
  always.dense = CudaChoices::Dense::always;
  never.dense = CudaChoices::Dense::never;
  EXPECT_TRUE(choose_path(problem, kernel, always).dense);
  EXPECT_TRUE(choose_path(problem, kernel, always).forced);
  EXPECT_FALSE(choose_path(five_percent_case(4), sparse_kernel_for(4, false), never).dense);
  // The dense path's largest order (float64 exactness; the int8 planes' int32 sums), and an
  // empty product: sparse whatever the choices and the prediction.
  problem.n = kDenseMaxOrder;
  EXPECT_FALSE(choose_path(problem, kernel, always).dense);
  problem = five_percent_case(4);
  problem.tiles = 0;
  EXPECT_FALSE(choose_path(problem, sparse_kernel_for(4, false), always).dense);
  EXPECT_FALSE(choose_path(problem, sparse_kernel_for(4, false), CudaChoices{}).dense);
}

// On random problems the choice is the smaller prediction, the sparse path on a tie; both
// predictions are at least the output's copy back, and grow with the work.
TEST(PathChoice, TheSmallerPredictionWinsOnRandomProblems) {
  std::mt19937_64 rng(30);
  const CudaChoices automatic;
  const PathCosts& costs = measured_path_costs();
  for (int c = 0; c < 2000; ++c) {
    PathProblem problem;
    problem.m = std::vector<std::int32_t>{1, 2, 3, 4, 5, 8, 13, 16, 23, 32, 64}[static_cast<std::size_t>(c % 11)];
    problem.n = problem.m * std::uniform_int_distribution<std::int64_t>(1, 100000)(rng);
    const double p = double(problem.n / problem.m);
    const double density = std::pow(10.0, std::uniform_real_distribution<double>(-4, 0)(rng));
    problem.dense_rows = static_cast<std::int32_t>(p);
    problem.block_products = static_cast<std::int64_t>(density * density * p * p * p);
    problem.tiles = static_cast<std::int64_t>(p * p * -std::expm1(-density * density * p));
    problem.walk = double(problem.tiles) * 2 * density * p;
    problem.dense_products = c % 4;
    const SparseKernel kernel = sparse_kernel_for(problem.m, c % 7 == 0, c % 3 == 0);
    const PathChoice choice = choose_path(problem, kernel, automatic);
    if (problem.tiles == 0 || problem.n >= kDenseMaxOrder) {
      EXPECT_FALSE(choice.dense);
      continue;
    }
    EXPECT_EQ(choice.dense, choice.predicted.dense_seconds < choice.predicted.sparse_seconds) << c;
    const double output = double(problem.tiles) * double(record_bytes<std::uint32_t>(problem.m)) / costs.copy_back_bytes_per_second;
    EXPECT_GE(choice.predicted.sparse_seconds, output);
    EXPECT_GE(choice.predicted.dense_seconds, output);
    PathProblem more = problem;
    more.block_products *= 2;
    more.walk *= 2;
    EXPECT_GE(predict_paths(more, kernel, costs).sparse_seconds, choice.predicted.sparse_seconds);
  }
}

// The problem of a panel from its layouts: the rows the dense tiles span (first to last row
// with tiles, empty ones between them too), and over the tiles the A row's length plus B's
// average column.
TEST(PathChoice, PanelProblemCountsTheRowsSpannedAndTheListsTheyMeet) {
  const std::vector<std::int64_t> tiles{0, 0, 2, 2, 5, 6, 6};  // rows of 0, 2, 0, 3, 1 and 0 tiles
  const std::int64_t a_row_ptr[] = {0, 4, 14, 14, 15, 35, 40};  // A rows of 4, 10, 0, 1, 20 and 5 blocks
  const PathProblem problem = path_problem(400, 4, tiles, a_row_ptr, 300, 77);  // p 100: B columns of 3
  EXPECT_EQ(problem.dense_rows, 4);  // rows 1 .. 4
  EXPECT_EQ(problem.tiles, 6);
  EXPECT_EQ(problem.block_products, 77);
  EXPECT_DOUBLE_EQ(problem.walk, 2 * (10 + 3) + 3 * (1 + 3) + 1 * (20 + 3));
}

// Before the symbolic phase, the estimate from uniform density comes near the problem of a
// uniform panel, so that cuBLAS is made ready where the dense path will run.
TEST(PathChoice, EstimateBeforeTheSymbolicPhaseFollowsUniformDensity) {
  for (const Measured& c : kIssue40) {
    const PathProblem exact = five_percent_case(c.m);
    const std::int64_t p = exact.n / c.m;
    const PathProblem estimate = estimated_path_problem(exact.n, c.m, static_cast<std::int32_t>(p), exact.block_products);
    EXPECT_NEAR(double(estimate.tiles), double(p * p), 0.1 * double(p * p)) << c.m;
    EXPECT_NEAR(estimate.walk, double(estimate.tiles) * 2 * 0.05 * double(p), 0.05 * estimate.walk) << c.m;
    const SparseKernel kernel = sparse_kernel_for(c.m, false);
    EXPECT_EQ(choose_path(estimate, kernel, CudaChoices{}).dense, c.dense < c.sparse) << c.m;
  }
  EXPECT_EQ(estimated_path_problem(65536, 8, 8192, 0).tiles, 0);
}

}  // namespace
}  // namespace blockmm::kernels::cuda
