// Exact symbolic phase: C(i,j) is non-empty iff some k has colmask(A(i,k)) & rowmask(B(k,j)).
// A row whose column window (its B rows' first to last column) is no wider in words than its
// work collects its columns in a bitset over the window: dense B rows ORed in as precomputed
// bitsets (dense inputs cost p/64 words per A block, not one operation per block product), other
// B rows as their words (finite-element rows: runs of neighbouring columns), a bit a product where
// masks must be tested. Other rows (short, over a wide window) use a stamp array and a sort.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "core/parallel_failure.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "operands/host_build.hpp"

namespace blockmm::kernels {
namespace {

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

// Each B row's columns as 64-bit words of a bitset over the columns: (word, bits) for every word
// the row touches. Finite-element rows hold runs of neighbouring columns (3-D Q1: nine runs of
// three), so a window row ORs in a third of the words it would set column by column.
struct RowWords {
  std::vector<std::int64_t> start;  // per B row (relative to b.row_begin), rows + 1; empty: no words
  LargeVector<std::int32_t> word;   // (a few per B block: in huge pages where they are large)
  LargeVector<std::uint64_t> bits;

  explicit RowWords(const BlockRowsView& b) : start(static_cast<std::size_t>(b.rows_held()) + 1, 0) {
    const std::int32_t rows = b.rows_held();
    const bool parallel = b.blocks() >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int32_t r = 0; r < rows; ++r) {  // words a row: its columns' distinct col / 64 (ascending)
      std::int64_t count = 0;
      for (std::int64_t f = b.row_ptr[r]; f < b.row_ptr[r + 1]; ++f)
        count += f == b.row_ptr[r] || (b.col[f] >> 6) != (b.col[f - 1] >> 6);
      start[r + 1] = count;
    }
    for (std::int32_t r = 0; r < rows; ++r) start[r + 1] += start[r];
    // Where runs are rare (random columns: a word a block), the words save little and would cost
    // 12 bytes a B block: none then.
    if (4 * start[rows] > 3 * b.blocks()) {
      std::vector<std::int64_t>().swap(start);
      return;
    }
    word.resize(static_cast<std::size_t>(start[rows]));
    bits.resize(static_cast<std::size_t>(start[rows]));
#pragma omp parallel for schedule(dynamic, 256) if (parallel)
    for (std::int32_t r = 0; r < rows; ++r) {
      std::fill(bits.data() + start[r], bits.data() + start[r + 1], 0);  // LargeVector leaves them uninitialised
      std::int64_t at = start[r] - 1;
      for (std::int64_t f = b.row_ptr[r]; f < b.row_ptr[r + 1]; ++f) {
        if (f == b.row_ptr[r] || (b.col[f] >> 6) != (b.col[f - 1] >> 6)) word[static_cast<std::size_t>(++at)] = b.col[f] >> 6;
        bits[static_cast<std::size_t>(at)] |= std::uint64_t{1} << (b.col[f] & 63);
      }
    }
  }
};

// One output row's columns, written in ascending order, by whichever of two forms costs least
// for it (a bitset over its column window, or a stamp and a sort). `row_bits_` is all zero
// between rows.
class RowCollector {
 public:
  RowCollector(const Operands& ops, const HeavyRowBitsets& heavy, const RowWords& words)
      : a_(ops.a), b_(ops.b), heavy_(heavy), words_(words), m_(ops.a.shape.m), mw_(mask_words(ops.a.shape.m)) {
    stamp_.assign(static_cast<std::size_t>(a_.shape.block_rows()), -1);
    row_bits_.assign(static_cast<std::size_t>(heavy.words), 0);
  }

  // Appends local row r's columns to `out`; returns how many.
  std::int64_t collect(std::int32_t r, LargeVector<std::int32_t>& out) {
    std::int64_t estimate = 0;
    std::int32_t lo = INT32_MAX, hi = -1;  // the row's column window: its B rows' first and last columns
    for (std::int64_t e = a_.row_ptr[r]; e < a_.row_ptr[r + 1]; ++e) {
      const std::int32_t kr = a_.col[e] - b_.row_begin;
      if (kr < 0 || kr >= b_.rows_held() || b_.row_ptr[kr] == b_.row_ptr[kr + 1]) continue;
      estimate += b_.row_ptr[kr + 1] - b_.row_ptr[kr];
      lo = std::min(lo, b_.col[b_.row_ptr[kr]]);
      hi = std::max(hi, b_.col[b_.row_ptr[kr + 1] - 1]);
    }
    if (estimate == 0) return 0;
    const std::int64_t window_words = (hi >> 6) - (lo >> 6) + 1;
    // At most `estimate` columns, and no more than the window holds: written through a pointer
    // (a push_back a column stored the vector's end back to memory each time).
    const std::size_t before = out.size();
    out.resize(before + static_cast<std::size_t>(std::min<std::int64_t>(estimate, hi - lo + 1)));
    std::int32_t* const first = out.data() + before;
    std::int32_t* last = first;
    if (window_words <= estimate)  // every row whose work exceeds a bitset's size, too
      last = bitset_row(r, lo >> 6, window_words, first);
    else
      last = stamp_row(r, first);
    out.resize(before + static_cast<std::size_t>(last - first));
    return last - first;
  }

 private:
  bool intersects(std::int64_t e, std::int64_t f) const {
    const std::uint64_t* x = a_.block_mask(e);
    const std::uint64_t* y = b_.block_mask(f);
    for (std::int32_t w = 0; w < mw_; ++w)
      if (x[w] & y[w]) return true;
    return false;
  }

  // Reads the bits of words [0, count) out as columns (base_word + w) * 64 + bit, clearing them.
  std::int32_t* read_out(std::int64_t base_word, std::int64_t count, std::int32_t* out) {
    for (std::int64_t w = 0; w < count; ++w) {
      const auto column0 = static_cast<std::int32_t>((base_word + w) * 64);
      for (std::uint64_t bits = row_bits_[w]; bits != 0; bits &= bits - 1) *out++ = column0 + __builtin_ctzll(bits);
      row_bits_[w] = 0;
    }
    return out;
  }

  // A row over a column window no wider than its work, in a bitset over the window's words: per A
  // block whose columns are all non-zero, its B row's precomputed bitset where the B row is dense
  // (p/64 words an A block, not one operation a block product), else the B row's words (RowWords);
  // otherwise a bit a block product with the mask test folded into it. No branch a product: a
  // test of a column stamp mispredicted on every new column, and its columns then needed a sort.
  std::int32_t* bitset_row(std::int32_t r, std::int64_t base_word, std::int64_t count, std::int32_t* out) {
    std::uint64_t* const bits = row_bits_.data();
    for (std::int64_t e = a_.row_ptr[r]; e < a_.row_ptr[r + 1]; ++e) {
      const std::int32_t kr = a_.col[e] - b_.row_begin;
      if (kr < 0 || kr >= b_.rows_held()) continue;
      if (mask_full(a_.block_mask(e), m_)) {  // every B block (none is all zero) meets it
        const std::uint64_t* brow = heavy_.slot.empty() ? nullptr : heavy_.row(kr);
        if (brow != nullptr) {
          for (std::int64_t w = 0; w < count; ++w) bits[w] |= brow[base_word + w];
          continue;
        }
        if (!words_.start.empty()) {
          for (std::int64_t w = words_.start[kr]; w < words_.start[kr + 1]; ++w)
            bits[words_.word[static_cast<std::size_t>(w)] - base_word] |= words_.bits[static_cast<std::size_t>(w)];
          continue;
        }
        for (std::int64_t f = b_.row_ptr[kr]; f < b_.row_ptr[kr + 1]; ++f)
          bits[(b_.col[f] >> 6) - base_word] |= std::uint64_t{1} << (b_.col[f] & 63);
        continue;
      }
      for (std::int64_t f = b_.row_ptr[kr]; f < b_.row_ptr[kr + 1]; ++f)
        bits[(b_.col[f] >> 6) - base_word] |= std::uint64_t{intersects(e, f)} << (b_.col[f] & 63);
    }
    return read_out(base_word, count, out);
  }

  // A short row over a wide window: a stamp a column, the found columns sorted.
  std::int32_t* stamp_row(std::int32_t r, std::int32_t* out) {
    std::int32_t* const first = out;
    const std::int32_t row_id = a_.row_begin + r;
    for (std::int64_t e = a_.row_ptr[r]; e < a_.row_ptr[r + 1]; ++e) {
      const std::int32_t kr = a_.col[e] - b_.row_begin;
      if (kr < 0 || kr >= b_.rows_held()) continue;
      for (std::int64_t f = b_.row_ptr[kr]; f < b_.row_ptr[kr + 1]; ++f) {
        const std::int32_t j = b_.col[f];
        if (stamp_[j] != row_id && intersects(e, f)) {
          stamp_[j] = row_id;
          *out++ = j;
        }
      }
    }
    std::sort(first, out);
    return out;
  }

  const BlockMatrix& a_;
  const BlockRowsView& b_;
  const HeavyRowBitsets& heavy_;
  const RowWords& words_;
  const std::int32_t m_, mw_;
  std::vector<std::int32_t> stamp_;
  std::vector<std::uint64_t> row_bits_;
};

// Where a chunk of rows put its columns: in its thread's buffer from `offset`.
struct ChunkColumns {
  int thread = 0;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

}  // namespace

TilePattern cpu_symbolic(const Operands& ops) {
  const BlockMatrix& a = ops.a;
  const BlockRowsView& b = ops.b;
  const std::int32_t p = a.shape.block_rows();
  const std::int32_t rows = a.rows_held();
  const HeavyRowBitsets heavy(b, p);
  const RowWords words(b);

  TilePattern pattern;
  pattern.row_begin = a.row_begin;
  pattern.row_end = a.row_end;
  pattern.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);

  constexpr std::int32_t kRowsPerChunk = 64;
  const std::int32_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<ChunkColumns> placed(static_cast<std::size_t>(chunks));
  // Small panels run on one thread: waking a team costs more than the work.
  const bool parallel = a.blocks() + b.blocks() >= (1 << 14);
  const int threads = parallel ? omp_get_max_threads() : 1;
  // Each thread appends its chunks' columns to a buffer of its own, in huge pages (fresh 4 KiB
  // pages, faulted here and again in a copy, cost a third of this phase on finite-element rows);
  // one thread's buffer is the pattern itself. Each is the thread's own local during the loop:
  // side by side in `columns`, the two vectors' ends (stored at every row) shared a cache line,
  // which bounced between the cores and took two threads as long as one.
  std::vector<LargeVector<std::int32_t>> columns(static_cast<std::size_t>(threads));
  // (A guess of its size, at most 32 MiB: a longer one grows by doubling.)
  const auto likely =
      static_cast<std::size_t>(std::min<std::int64_t>(4 * a.blocks() / threads, std::int64_t{8} << 20));
  ParallelFailure failure;  // out of memory in a thread: rethrown after the region
#pragma omp parallel num_threads(threads)
  {
    std::unique_ptr<RowCollector> collector;
    LargeVector<std::int32_t> mine;
    failure.run([&] {
      collector = std::make_unique<RowCollector>(ops, heavy, words);
      mine.reserve(likely);
    });
#pragma omp for schedule(dynamic, 1)
    for (std::int32_t c = 0; c < chunks; ++c) {
      if (failure.failed()) continue;  // every thread still reaches the loop's barrier
      failure.run([&] {
        ChunkColumns& chunk = placed[static_cast<std::size_t>(c)];
        chunk.thread = omp_get_thread_num();
        chunk.offset = static_cast<std::int64_t>(mine.size());
        for (std::int32_t r = c * kRowsPerChunk; r < std::min(rows, (c + 1) * kRowsPerChunk); ++r)
          pattern.row_ptr[r + 1] = collector->collect(r, mine);
        chunk.count = static_cast<std::int64_t>(mine.size()) - chunk.offset;
      });
    }
    columns[static_cast<std::size_t>(omp_get_thread_num())] = std::move(mine);
  }
  failure.rethrow_if_failed();

  for (std::int32_t r = 0; r < rows; ++r) pattern.row_ptr[r + 1] += pattern.row_ptr[r];
  if (threads == 1) {
    pattern.col = std::move(columns[0]);
    return pattern;
  }
  pattern.col.resize(static_cast<std::size_t>(pattern.row_ptr[rows]));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int32_t c = 0; c < chunks; ++c) {
    const ChunkColumns& chunk = placed[static_cast<std::size_t>(c)];
    if (chunk.count > 0)
      std::memcpy(pattern.col.data() + pattern.row_ptr[c * kRowsPerChunk],
                  columns[static_cast<std::size_t>(chunk.thread)].data() + chunk.offset,
                  static_cast<std::size_t>(chunk.count) * sizeof(std::int32_t));
  }
  return pattern;
}

}  // namespace blockmm::kernels
