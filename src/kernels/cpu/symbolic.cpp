// Exact symbolic phase: C(i,j) is non-empty iff some k has colmask(A(i,k)) & rowmask(B(k,j)).
// Light rows collect their columns with a stamp array and sort them; rows whose estimated
// work exceeds a bitset's size OR whole precomputed B-row bitsets instead, so that dense
// inputs cost p/64 words per A block, not one operation per block product.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel_failure.hpp"
#include "kernels/cpu/cpu_backend.hpp"

namespace blockmm::kernels {
namespace {

bool masks_intersect(const std::uint64_t* x, const std::uint64_t* y, std::int32_t words) {
  for (std::int32_t w = 0; w < words; ++w)
    if (x[w] & y[w]) return true;
  return false;
}

bool mask_full(const std::uint64_t* mask, std::int32_t m) {
  const std::int32_t words = mask_words(m);
  for (std::int32_t w = 0; w < words; ++w) {
    const std::int32_t bits = std::min(64, m - 64 * w);
    const std::uint64_t full = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    if (mask[w] != full) return false;
  }
  return true;
}

// Bitsets of the B rows with more blocks than a bitset has words (memory <= 8 bytes a block).
struct HeavyRowBitsets {
  std::int64_t words = 0;
  std::vector<std::int64_t> slot;  // per B row (relative to b.row_begin): bitset index or -1
  std::vector<std::uint64_t> bits;

  HeavyRowBitsets(const BlockRowsView& b, std::int32_t p) : words((p + 63) / 64) {
    std::int64_t heavy = 0;
    for (std::int32_t r = 0; r < b.rows_held(); ++r) heavy += b.row_ptr[r + 1] - b.row_ptr[r] > words;
    if (heavy == 0) return;  // sparse B: no slot table either (it would cost 8 bytes a block-row)
    slot.assign(static_cast<std::size_t>(b.rows_held()), -1);
    heavy = 0;
    for (std::int32_t r = 0; r < b.rows_held(); ++r)
      if (b.row_ptr[r + 1] - b.row_ptr[r] > words) slot[r] = heavy++;
    bits.assign(static_cast<std::size_t>(heavy * words), 0);
#pragma omp parallel for schedule(dynamic, 16) if (heavy > 16)
    for (std::int32_t r = 0; r < b.rows_held(); ++r) {
      if (slot[r] < 0) continue;
      std::uint64_t* row_bits = bits.data() + slot[r] * words;
      for (std::int64_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e)
        row_bits[b.col[e] >> 6] |= std::uint64_t{1} << (b.col[e] & 63);
    }
  }
  const std::uint64_t* row(std::int32_t r) const {
    return slot.empty() || slot[r] < 0 ? nullptr : bits.data() + slot[r] * words;
  }
};

}  // namespace

TilePattern cpu_symbolic(const Operands& ops) {
  const BlockMatrix& a = ops.a;
  const BlockRowsView& b = ops.b;
  const std::int32_t p = a.shape.block_rows();
  const std::int32_t m = a.shape.m;
  const std::int32_t mw = mask_words(m);
  const std::int32_t rows = a.rows_held();
  const HeavyRowBitsets heavy(b, p);
  const std::int64_t words = heavy.words;

  TilePattern pattern;
  pattern.row_begin = a.row_begin;
  pattern.row_end = a.row_end;
  pattern.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);

  constexpr std::int32_t kRowsPerChunk = 64;
  const std::int32_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<std::vector<std::int32_t>> chunk_cols(static_cast<std::size_t>(chunks));

  // Small panels run on one thread: waking a team costs more than the work.
  const bool parallel = a.blocks() + b.blocks() >= (1 << 14);
  ParallelFailure failure;  // out of memory in a thread: rethrown after the region
#pragma omp parallel if (parallel)
  {
    std::vector<std::int32_t> stamp;
    std::vector<std::uint64_t> row_bits;
    std::vector<std::int32_t> found;
    failure.run([&] {
      stamp.assign(static_cast<std::size_t>(p), -1);
      row_bits.assign(static_cast<std::size_t>(words), 0);
    });
#pragma omp for schedule(dynamic, 1)
    for (std::int32_t c = 0; c < chunks; ++c) {
      if (failure.failed()) continue;  // every thread still reaches the loop's barrier
      failure.run([&] {
        std::vector<std::int32_t>& out = chunk_cols[c];
        const std::int32_t r_end = std::min(rows, (c + 1) * kRowsPerChunk);
        // Room for the likely output up front: growing by doubling copies and faults pages twice.
        std::int64_t expected = 0;
        for (std::int32_t r = c * kRowsPerChunk; r < r_end; ++r) {
          std::int64_t row_estimate = 0;
          for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1] && row_estimate < p; ++e) {
            const std::int32_t kr = a.col[e] - b.row_begin;
            if (kr >= 0 && kr < b.rows_held()) row_estimate += b.row_ptr[kr + 1] - b.row_ptr[kr];
          }
          expected += std::min<std::int64_t>(row_estimate, p);
        }
        out.reserve(static_cast<std::size_t>(expected));
        for (std::int32_t r = c * kRowsPerChunk; r < r_end; ++r) {
          std::int64_t estimate = 0;
          for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
            const std::int32_t kr = a.col[e] - b.row_begin;
            if (kr >= 0 && kr < b.rows_held()) estimate += b.row_ptr[kr + 1] - b.row_ptr[kr];
          }
          const std::size_t before = out.size();
          if (estimate > words) {
            std::fill(row_bits.begin(), row_bits.end(), 0);
            for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
              const std::int32_t kr = a.col[e] - b.row_begin;
              if (kr < 0 || kr >= b.rows_held()) continue;
              const std::uint64_t* amask = a.block_mask(e);
              const std::uint64_t* brow = heavy.row(kr);
              if (brow != nullptr && mask_full(amask, m)) {
                for (std::int64_t w = 0; w < words; ++w) row_bits[w] |= brow[w];
                continue;
              }
              for (std::int64_t f = b.row_ptr[kr]; f < b.row_ptr[kr + 1]; ++f)
                if (masks_intersect(amask, b.block_mask(f), mw))
                  row_bits[b.col[f] >> 6] |= std::uint64_t{1} << (b.col[f] & 63);
            }
            for (std::int64_t w = 0; w < words; ++w) {
              for (std::uint64_t bits = row_bits[w]; bits != 0; bits &= bits - 1)
                out.push_back(static_cast<std::int32_t>(w * 64 + __builtin_ctzll(bits)));
            }
          } else {
            found.clear();
            const std::int32_t row_id = a.row_begin + r;
            for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
              const std::int32_t kr = a.col[e] - b.row_begin;
              if (kr < 0 || kr >= b.rows_held()) continue;
              const std::uint64_t* amask = a.block_mask(e);
              for (std::int64_t f = b.row_ptr[kr]; f < b.row_ptr[kr + 1]; ++f) {
                const std::int32_t j = b.col[f];
                if (stamp[j] != row_id && masks_intersect(amask, b.block_mask(f), mw)) {
                  stamp[j] = row_id;
                  found.push_back(j);
                }
              }
            }
            std::sort(found.begin(), found.end());
            out.insert(out.end(), found.begin(), found.end());
          }
          pattern.row_ptr[r + 1] = static_cast<std::int64_t>(out.size() - before);
        }
      });
    }
  }
  failure.rethrow_if_failed();

  for (std::int32_t r = 0; r < rows; ++r) pattern.row_ptr[r + 1] += pattern.row_ptr[r];
  pattern.col.resize(static_cast<std::size_t>(pattern.row_ptr[rows]));
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int32_t c = 0; c < chunks; ++c) {
    if (!chunk_cols[c].empty())
      std::memcpy(pattern.col.data() + pattern.row_ptr[c * kRowsPerChunk], chunk_cols[c].data(),
                  chunk_cols[c].size() * sizeof(std::int32_t));
  }
  return pattern;
}

}  // namespace blockmm::kernels
