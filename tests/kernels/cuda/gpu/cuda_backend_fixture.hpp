// What the cuda backend's test files share (cuda_backend_test.cpp, cuda_dense_test.cpp,
// cuda_operands_test.cpp, device_memory_test.cpp): the CudaBackend fixture, which skips without a
// GPU and resets the choices the backend runs with, the choices of a loop over the paths, backends
// on two GPUs, a sink that appends tiles in order, and the comparison of a cuda run against the
// reference backend's bytes on given and random cases.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "core/record_sink.hpp"
#include "kernels/cuda_start.hpp"
#include "support/dense_reference.hpp"
#include "support/multiply.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::testing {

using kernels::BackendKind;
using kernels::CudaChoices;

// The choices the cuda backend runs with in the current test (its config, not the environment).
inline CudaChoices g_cuda;

// GPUs CUDA sees in this process (one CudaStart a process, as blockmm has).
inline int gpu_count() {
  static kernels::CudaStart probe(true);
  return probe.device_count();
}

// Case c of a loop over the paths: the automatic choice, the dense path always, never.
inline void choose_path_of_case(int c) {
  g_cuda = {};
  if (c % 3 == 1) g_cuda.dense = CudaChoices::Dense::always;
  if (c % 3 == 2) g_cuda.dense = CudaChoices::Dense::never;
}

// Backends on two GPUs for operands moved between them: GPU 0 and the second GPU where there is
// one, else GPU 0 again (a second backend there), through a CudaStart of the test's own.
class TwoGpus {
 public:
  TwoGpus() : start_(true), other_(start_.device_count() > 1 ? 1 : 0) { start_.start_devices({0, other_}, 1 << 20, 2); }
  int other() const { return other_; }
  // A backend with the current choices on GPU 0, or on the other GPU.
  std::unique_ptr<kernels::Backend> backend(bool on_other = false) {
    kernels::CudaConfig config;
    config.choices = g_cuda;
    config.device = on_other ? other_ : 0;
    return start_.make_backend(config);
  }

 private:
  kernels::CudaStart start_;
  int other_;
};

// A cuda backend on GPU 0 with the current choices and `budget`.
inline std::unique_ptr<kernels::Backend> cuda_backend(std::int64_t budget = 0) {
  return make_test_backend(BackendKind::cuda, budget, g_cuda);
}

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device visible (or a build without CUDA)";
    g_cuda = {};
  }
  void TearDown() override { g_cuda = {}; }
};

// Appends the tiles it is given (each range's, in order) to one output.
class AppendingSink final : public RecordSink {
 public:
  explicit AppendingSink(OutputRecords& out) : out_(out), start_(out.size()) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    if (start_ + first_tile != out_.size()) throw std::logic_error("tiles out of order at " + std::to_string(first_tile));
    out_.bytes.insert(out_.bytes.end(), records, records + count * out_.stride());
  }

 private:
  OutputRecords& out_;
  std::int64_t start_;
};

// `path`, when given, must appear in the backend's description of the run (which dense path ran).
inline void expect_same(const InputRecords& a, const InputRecords& b, const std::string& what, std::int64_t chunk_bytes,
                        std::int64_t budget = 0, const std::string& path = "") {
  const ProductRun expected = multiply(a, b, BackendKind::reference);
  const ProductRun actual = multiply(a, b, BackendKind::cuda, chunk_bytes, budget, g_cuda);
  ASSERT_TRUE(expected.output.bytes == actual.output.bytes)
      << what << ": " << compare_outputs(expected.output, actual.output);
  EXPECT_EQ(expected.layout.row_ptr, actual.layout.row_ptr) << what;
  EXPECT_EQ(expected.block_products, actual.block_products) << what;
  if (!path.empty() && expected.layout.tiles() > 0)
    EXPECT_NE(actual.device.find(path), std::string::npos) << what << ": ran on " << actual.device;
}

inline void random_cases(int cases, std::uint64_t seed, std::int32_t max_block_rows, const std::string& path = "") {
  std::mt19937_64 rng(seed);
  for (int c = 0; c < cases; ++c) {
    const RandomSpec spec = random_spec(rng, max_block_rows);
    const InputRecords a = random_blocks(spec, rng);
    const InputRecords b = c % 5 == 0 ? a : random_blocks(spec, rng);
    // Every third case with one-tile chunks: many chunks through the pipeline.
    expect_same(a, b, "case " + std::to_string(c) + " n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m),
                c % 3 == 0 ? 1 : std::int64_t{256} << 20, 0, path);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace blockmm::testing
