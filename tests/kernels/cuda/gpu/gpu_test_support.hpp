// What the GPU test files beside cuda_backend_test.cpp share: the skip without a device, and the
// comparison of a cuda run (with given choices) against the reference backend's bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/cuda_start.hpp"
#include "support/dense_reference.hpp"
#include "support/multiply.hpp"

namespace blockmm::testing {

// GPUs CUDA sees in this process (one CudaStart a process, as blockmm has).
inline int gpus_visible() {
  static kernels::CudaStart probe(true);
  return probe.device_count();
}

#define BLOCKMM_SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                               \
    if (::blockmm::testing::gpus_visible() == 0) GTEST_SKIP() << "no CUDA device visible (or a build without CUDA)"; \
  } while (0)

// The cuda backend's run of a x b under `choices` (and `budget` device bytes, 0: its default)
// must give the reference backend's bytes, and its device line must contain each of `paths`.
inline ProductRun expect_reference_bytes(const InputRecords& a, const InputRecords& b, const kernels::CudaChoices& choices,
                                         const std::string& what, std::int64_t budget = 0,
                                         std::initializer_list<std::string> paths = {},
                                         std::int64_t chunk_bytes = std::int64_t{256} << 20) {
  const ProductRun expected = multiply(a, b, kernels::BackendKind::reference);
  ProductRun actual = multiply(a, b, kernels::BackendKind::cuda, chunk_bytes, budget, choices);
  EXPECT_TRUE(expected.output.bytes == actual.output.bytes) << what << ": " << compare_outputs(expected.output, actual.output);
  EXPECT_EQ(expected.layout.row_ptr, actual.layout.row_ptr) << what;
  EXPECT_EQ(expected.block_products, actual.block_products) << what;
  if (expected.layout.tiles() > 0)
    for (const std::string& path : paths)
      EXPECT_NE(actual.device.find(path), std::string::npos) << what << ": ran on " << actual.device << ", not " << path;
  return actual;
}

}  // namespace blockmm::testing
