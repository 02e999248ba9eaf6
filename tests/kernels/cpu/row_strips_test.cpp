// The strip kernel for m = 9..64 at the padded stride (avx512_row_strips.hpp), at every level that
// has it: A blocks with zero rows and columns (the kernel contracts over the others only), one
// plane by the row-sum rule exactly at its boundary and just past it, two planes, accumulators near
// 2^32 - 1, B blocks whose last row ends at the end of a readable page (its strip loads must not
// read past it), against 64-bit sums saturated once. The padding lanes are never compared: they
// are the kernel's scratch.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/block_kernels.hpp"
#include "kernels/cpu/simd_level_test.hpp"

namespace blockmm::testing {
namespace {

using kernels::cpu::SimdLevel;

constexpr std::uint32_t kMax = 0xFFFFFFFFu;

class RowStrips : public SimdLevelTest {};

// How an A block's values are drawn.
enum class AKind {
  holes,        // up to 1023, a third of its rows and columns zero, more zeros inside
  row_sum_max,  // every row sums to exactly 65537 with values <= 32767: one plane, at its bound
  row_sum_over, // one row sums to 65538: two planes
  any,          // up to 65535: two planes
};

std::vector<std::uint16_t> a_block(std::int32_t m, AKind kind, std::mt19937_64& rng) {
  std::vector<std::uint16_t> a(static_cast<std::size_t>(m) * m, 0);
  std::uniform_int_distribution<std::uint32_t> small(0, 1023), any(0, 65535), coin(0, 2);
  std::vector<bool> zero_row(static_cast<std::size_t>(m)), zero_col(static_cast<std::size_t>(m));
  for (std::int32_t x = 0; x < m; ++x) {
    zero_row[static_cast<std::size_t>(x)] = kind == AKind::holes && coin(rng) == 0;
    zero_col[static_cast<std::size_t>(x)] = kind == AKind::holes && coin(rng) == 0;
  }
  for (std::int32_t r = 0; r < m; ++r) {
    std::uint32_t left = kind == AKind::row_sum_over && r == m / 2 ? 65538 : 65537;
    for (std::int32_t c = 0; c < m; ++c) {
      std::uint16_t& v = a[static_cast<std::size_t>(r * m + c)];
      if (kind == AKind::holes) {
        if (!zero_row[static_cast<std::size_t>(r)] && !zero_col[static_cast<std::size_t>(c)] && coin(rng) != 0)
          v = static_cast<std::uint16_t>(small(rng));
      } else if (kind == AKind::any) {
        v = static_cast<std::uint16_t>(any(rng));
      } else {  // spread `left` over the row, no value above 32767
        const std::uint32_t share = c == m - 1 ? left : std::min<std::uint32_t>(left, 32767 / 2 + static_cast<std::uint32_t>(rng() % 2));
        v = static_cast<std::uint16_t>(std::min<std::uint32_t>(share, 32767));
        left -= v;
      }
    }
  }
  if (kind == AKind::holes) a[0] = 1;  // never all zero (the build drops those)
  return a;
}

// Memory whose last `bytes` end at the end of a readable page, the next page unreadable.
class PageEnd {
 public:
  explicit PageEnd(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    pages_ = (bytes + page - 1) / page + 1;
    base_ = static_cast<std::byte*>(mmap(nullptr, pages_ * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    mprotect(base_ + (pages_ - 1) * page, page, PROT_NONE);
    data_ = base_ + (pages_ - 1) * page - bytes;
    length_ = pages_ * page;
  }
  ~PageEnd() { munmap(base_, length_); }
  PageEnd(const PageEnd&) = delete;
  PageEnd& operator=(const PageEnd&) = delete;
  std::byte* data() const { return data_; }

 private:
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t pages_ = 0, length_ = 0;
};

void check_strips(SimdLevel level, std::int32_t m, AKind kind, std::mt19937_64& rng) {
  const std::int64_t mm = std::int64_t{m} * m;
  const std::int64_t stride = kernels::cpu::padded_accumulator_stride(level, m);
  const std::int64_t row_stride = kernels::cpu::padded_row_stride(level, m);
  ASSERT_EQ(stride, m * row_stride);
  const kernels::cpu::BlockRowKernel kernel = kernels::cpu::padded_block_row_kernel(level, m);
  ASSERT_NE(kernel, nullptr);
  const std::vector<std::uint16_t> a = a_block(m, kind, rng);
  // B blocks: random columns over 5 tiles and one dropped (slot -1); values up to 65535, a
  // quarter of the rows zero; the last block's last row ends at an unreadable page.
  const std::int64_t count = std::uniform_int_distribution<std::int64_t>(1, 7)(rng);
  const std::vector<std::int32_t> slot = {0, 1, -1, 2, 3, 4};
  std::vector<std::int32_t> b_col(static_cast<std::size_t>(count));
  for (auto& c : b_col) c = std::uniform_int_distribution<std::int32_t>(0, 5)(rng);
  PageEnd b_memory(static_cast<std::size_t>(count * mm) * 2);
  auto* b = reinterpret_cast<std::uint16_t*>(b_memory.data());
  // At the row-sum bound, B is all 65535 and the accumulators start at 0: a sum is then exactly
  // 2^32 - 1 (one plane, its bound) or past it (two planes; one would wrap), never hidden.
  const bool at_bound = kind == AKind::row_sum_max || kind == AKind::row_sum_over;
  std::uniform_int_distribution<std::uint32_t> value(0, 65535), quarter(0, 3);
  for (std::int64_t f = 0; f < count; ++f)
    for (std::int32_t l = 0; l < m; ++l) {
      const bool zero = !at_bound && quarter(rng) == 0;
      for (std::int32_t c = 0; c < m; ++c)
        b[f * mm + l * m + c] = zero ? 0 : at_bound ? 65535 : static_cast<std::uint16_t>(value(rng));
    }
  // 64-byte aligned accumulators, zero, random or near 2^32 - 1.
  std::vector<std::uint32_t> storage(static_cast<std::size_t>(5 * stride + 16));
  std::uint32_t* acc = storage.data() + ((64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64) / 4;
  std::uniform_int_distribution<std::uint32_t> pick(0, 2), near(0, 1u << 20), any32(0, kMax);
  for (std::int64_t q = 0; q < 5 * stride; ++q) {
    const std::uint32_t p = at_bound ? 0 : pick(rng);
    acc[q] = p == 0 ? 0 : p == 1 ? any32(rng) : kMax - near(rng);
  }
  std::vector<std::uint64_t> exact(acc, acc + 5 * stride);
  add_exact_products(exact, stride, row_stride, m, a.data(), b, b_col.data(), count, slot.data());
  std::vector<std::uint64_t> scratch(static_cast<std::size_t>(mm));
  kernel({acc, stride, m, a.data(), b, b_col.data(), count, slot.data(), scratch.data()});
  for (std::int32_t t = 0; t < 5; ++t)
    for (std::int32_t r = 0; r < m; ++r)
      for (std::int32_t c = 0; c < m; ++c) {
        const std::int64_t q = t * stride + r * row_stride + c;
        const std::uint64_t x = exact[static_cast<std::size_t>(q)];
        ASSERT_EQ(acc[q], x > kMax ? kMax : static_cast<std::uint32_t>(x))
            << "m=" << m << " A kind " << static_cast<int>(kind) << " tile " << t << " (" << r << ", " << c << ")";
      }
}

TEST_P(RowStrips, PaddedKernelMatchesReference) {
  if (kernels::cpu::padded_accumulator_stride(GetParam(), 23) == 0) GTEST_SKIP() << "no padded strip kernel at this level";
  std::mt19937_64 rng(4823 + static_cast<int>(GetParam()));
  for (std::int32_t m : {9, 15, 16, 17, 23, 31, 32, 33, 47, 64})
    for (AKind kind : {AKind::holes, AKind::row_sum_max, AKind::row_sum_over, AKind::any})
      for (int rep = 0; rep < 3; ++rep) {
        check_strips(GetParam(), m, kind, rng);
        if (HasFatalFailure()) return;
      }
}

// The padded form exists for m = 2..7 but 4 and m = 9..64 on the AVX-512 byte-plane levels only,
// and its strides describe it.
TEST_P(RowStrips, PaddedFormsAndStrides) {
  const SimdLevel level = GetParam();
  const bool avx512 = level == SimdLevel::avx512_planes || level == SimdLevel::avx512_vnni;
  for (std::int32_t m = 1; m <= 70; ++m) {
    const bool expected = avx512 && ((m >= 2 && m <= 7 && m != 4) || (m >= 9 && m <= 64));
    EXPECT_EQ(kernels::cpu::padded_block_row_kernel(level, m) != nullptr, expected) << "m=" << m;
    EXPECT_EQ(kernels::cpu::padded_accumulator_stride(level, m) > 0, expected) << "m=" << m;
    if (!expected) continue;
    const std::int64_t row_stride = kernels::cpu::padded_row_stride(level, m);
    EXPECT_EQ(row_stride, m <= 7 ? m : 16 * ((m + 15) / 16)) << "m=" << m;
    EXPECT_EQ(kernels::cpu::padded_accumulator_stride(level, m) % 16, 0) << "m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, RowStrips, ::testing::ValuesIn(kernels::cpu::kAllSimdLevels), simd_level_test_name);

}  // namespace
}  // namespace blockmm::testing
