#include "tools/generator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <numeric>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "core/record_layout.hpp"
#include "io/atomic_output.hpp"
#include "io/file_access.hpp"
#include "tools/counter_rng.hpp"
#include "tools/row_counts.hpp"

namespace blockmm::tools {
namespace {

// Purposes of the sub-streams derived from the seed; changing one changes every file.
enum Purpose : std::uint64_t { kColumns = 1, kValues = 2, kZeroBlocks = 3, kShuffle = 4 };

constexpr std::int64_t kChunkBytes = std::int64_t{32} << 20;

// The block pattern in row-major order: block g (0 <= g < k) is (row, col) = (block[g] >> 32,
// block[g] & 0xFFFFFFFF). Both in one word: a shuffled write reads it at random, one miss a block.
struct Pattern {
  std::vector<std::int64_t> row_offset;  // p + 1
  std::vector<std::uint64_t> block;      // k, columns ascending within a row
};

// Row i's columns are the first count_i images of a permutation of [0, p) keyed by (seed, i):
// a uniform-looking sample of distinct columns, found without a shared generator.
Pattern make_pattern(const GenSpec& spec, std::uint64_t seed_key) {
  const std::int64_t p = spec.n / spec.m;
  const std::vector<std::int64_t> counts = block_row_counts(spec.k, p, spec.skew);
  Pattern pattern;
  pattern.row_offset.resize(static_cast<std::size_t>(p + 1), 0);
  std::partial_sum(counts.begin(), counts.end(), pattern.row_offset.begin() + 1);
  pattern.block.resize(static_cast<std::size_t>(spec.k));
  const std::uint64_t columns_key = derive(seed_key, kColumns);
  ParallelFailure failure;  // a thread's bitmap may not fit: rethrown after the region
#pragma omp parallel
  {
    std::vector<std::uint64_t> bits;  // this thread's bitmap over [0, p), all clear between rows
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t i = 0; i < p; ++i) {
      if (failure.failed()) continue;
      const std::int64_t c = counts[static_cast<std::size_t>(i)];
      std::uint64_t* out = pattern.block.data() + pattern.row_offset[static_cast<std::size_t>(i)];
      if (c == 0) continue;
      const std::uint64_t row_bits = static_cast<std::uint64_t>(i) << 32;
      if (c == p) {
        for (std::int64_t x = 0; x < c; ++x) out[x] = row_bits | static_cast<std::uint64_t>(x);
        continue;
      }
      const KeyedPermutation columns(derive(columns_key, static_cast<std::uint64_t>(i)), static_cast<std::uint64_t>(p));
      if (c * 32 >= p) {
        // Dense row: mark a bitmap and read it back in order, cheaper than sorting.
        try {
          bits.resize(static_cast<std::size_t>((p + 63) / 64), 0);
        } catch (...) {
          failure.capture();
          continue;
        }
        for (std::int64_t x = 0; x < c; ++x) {
          const std::uint64_t j = columns(static_cast<std::uint64_t>(x));
          bits[j >> 6] |= std::uint64_t{1} << (j & 63);
        }
        std::int64_t w = 0;
        for (std::size_t word = 0; word < bits.size(); ++word) {
          for (std::uint64_t b = bits[word]; b != 0; b &= b - 1)
            out[w++] = row_bits | (word * 64 + static_cast<std::uint64_t>(__builtin_ctzll(b)));
          bits[word] = 0;
        }
      } else {
        for (std::int64_t x = 0; x < c; ++x) out[x] = row_bits | columns(static_cast<std::uint64_t>(x));
        std::sort(out, out + c);
      }
    }
  }
  failure.rethrow_if_failed();
  return pattern;
}

class RecordFiller {
 public:
  RecordFiller(const GenSpec& spec, const Pattern& pattern, std::uint64_t seed_key)
      : spec_(spec),
        pattern_(pattern),
        values_key_(derive(seed_key, kValues)),
        zero_count_(zero_block_count(spec)),
        zero_choice_(derive(seed_key, kZeroBlocks), static_cast<std::uint64_t>(std::max<std::int64_t>(spec.k, 1))),
        shuffle_(derive(seed_key, kShuffle), static_cast<std::uint64_t>(std::max<std::int64_t>(spec.k, 1))),
        stride_(record_bytes<std::uint16_t>(spec.m)) {}

  std::int64_t stride() const { return stride_; }

  // Output records [first, first + count) into `out`.
  void fill(std::int64_t first, std::int64_t count, std::byte* out) const {
    if (spec_.order != RecordOrder::shuffled) {
#pragma omp parallel for schedule(static)
      for (std::int64_t q = 0; q < count; ++q) {
        const std::int64_t position = first + q;
        const std::int64_t g = spec_.order == RecordOrder::sorted ? position : spec_.k - 1 - position;
        fill_record(g, out + q * stride_);
      }
      return;
    }
    // Shuffled: the pattern is read at random, a cache miss per block. Batches of blocks are
    // looked up and prefetched together so that their misses overlap.
    constexpr std::int64_t kBatch = 32;
    const std::int64_t batches = (count + kBatch - 1) / kBatch;
#pragma omp parallel for schedule(static)
    for (std::int64_t batch = 0; batch < batches; ++batch) {
      const std::int64_t q0 = batch * kBatch;
      const std::int64_t q1 = std::min(count, q0 + kBatch);
      std::uint64_t g[kBatch];
      for (std::int64_t q = q0; q < q1; ++q) {
        g[q - q0] = shuffle_(static_cast<std::uint64_t>(first + q));
        __builtin_prefetch(pattern_.block.data() + g[q - q0]);
      }
      for (std::int64_t q = q0; q < q1; ++q) fill_record(static_cast<std::int64_t>(g[q - q0]), out + q * stride_);
    }
  }

 private:
  void fill_record(std::int64_t g, std::byte* record) const {
    const std::uint64_t block = pattern_.block[static_cast<std::size_t>(g)];
    const auto i = static_cast<std::int32_t>(block >> 32);
    const auto j = static_cast<std::int32_t>(block & 0xFFFFFFFFu);
    set_record_index(record, i, j);
    std::byte* values = record + 8;
    const std::int64_t count = std::int64_t{spec_.m} * spec_.m;
    // Exactly zero_count_ blocks, chosen by a permutation of the row-major block numbers.
    if (zero_count_ > 0 && zero_choice_(static_cast<std::uint64_t>(g)) < static_cast<std::uint64_t>(zero_count_)) {
      std::memset(values, 0, static_cast<std::size_t>(2 * count));
      return;
    }
    // Keyed by (i, j), not by position: every order of one seed holds the same matrix.
    Stream stream(derive(derive(values_key_, static_cast<std::uint64_t>(i)), static_cast<std::uint64_t>(j)));
    const std::uint64_t range = std::uint64_t{spec_.max_value} - spec_.min_value + 1;
    bool any = false;
    // A block that is not meant to be zero is redrawn until it is not (only possible when
    // min_value = 0; check_spec rules out max_value = 0 here).
    while (!any) {
      for (std::int64_t e = 0; e < count; ++e) {
        const auto v = static_cast<std::uint16_t>(spec_.min_value + stream.below(range));
        any |= v != 0;
        std::memcpy(values + 2 * e, &v, 2);
      }
    }
  }

  const GenSpec& spec_;
  const Pattern& pattern_;
  std::uint64_t values_key_;
  std::int64_t zero_count_;
  KeyedPermutation zero_choice_;
  KeyedPermutation shuffle_;
  std::int64_t stride_;
};

}  // namespace

std::int64_t zero_block_count(const GenSpec& spec) {
  const auto z = static_cast<std::int64_t>(std::llround(spec.zero_blocks * static_cast<double>(spec.k)));
  return std::clamp<std::int64_t>(z, 0, spec.k);
}

void check_spec(const GenSpec& spec) {
  if (spec.n <= 0) throw UsageError("--n " + std::to_string(spec.n) + " must be positive");
  if (spec.m <= 0) throw UsageError("--m " + std::to_string(spec.m) + " must be positive");
  if (spec.n % spec.m != 0)
    throw UsageError("--n " + std::to_string(spec.n) + " is not a multiple of --m " + std::to_string(spec.m));
  const std::int64_t p = spec.n / spec.m;
  if (spec.k < 0) throw UsageError("--k " + std::to_string(spec.k) + " is negative");
  if (spec.k > p * p)
    throw UsageError("--k " + std::to_string(spec.k) + " exceeds the (n/m)^2 = " + std::to_string(p * p) +
                     " blocks a matrix has");
  if (spec.k > std::numeric_limits<std::int32_t>::max())
    throw UsageError("--k " + std::to_string(spec.k) + " does not fit the format's int32 header field");
  if (spec.max_value > 65535)
    throw UsageError("--max-value " + std::to_string(spec.max_value) + " exceeds 65535 (values are uint16)");
  if (spec.min_value > spec.max_value)
    throw UsageError("--min-value " + std::to_string(spec.min_value) + " exceeds --max-value " +
                     std::to_string(spec.max_value));
  if (!(spec.skew >= 0) || !std::isfinite(spec.skew))
    throw UsageError("--skew " + std::to_string(spec.skew) + " must be a finite number >= 0");
  if (!(spec.zero_blocks >= 0 && spec.zero_blocks <= 1))
    throw UsageError("--zero-blocks " + std::to_string(spec.zero_blocks) + " must lie in [0, 1]");
  if (spec.max_value == 0 && zero_block_count(spec) < spec.k)
    throw UsageError("--max-value 0 makes every block all-zero: say so with --zero-blocks 1");
}

GenResult generate(const GenSpec& spec, const std::string& path) {
  check_spec(spec);
  const std::uint64_t seed_key = mix64(spec.seed ^ 0x626c6f636b6d6d00ULL);  // "blockmm"
  const Pattern pattern = make_pattern(spec, seed_key);
  const RecordFiller filler(spec, pattern, seed_key);

  const comm::Communicator single{comm::CommunicatorOptions{}};
  io::AtomicOutput output(path, single);
  GenResult result;
  result.zero_blocks = zero_block_count(spec);
  {
    const auto writer = output.open_writer();
    const std::int32_t header[3] = {spec.n, spec.m, static_cast<std::int32_t>(spec.k)};
    writer->write_at(0, header, sizeof header);
    // Two buffers: threads fill one while the previous one is being written.
    const std::int64_t stride = filler.stride();
    const std::int64_t per_chunk = std::max<std::int64_t>(1, kChunkBytes / stride);
    const std::int64_t buffer_records = std::min(per_chunk, std::max<std::int64_t>(spec.k, 1));
    std::vector<std::byte> buffers[2];
    std::future<void> pending;
    int current = 0;
    for (std::int64_t first = 0; first < spec.k; first += per_chunk) {
      const std::int64_t count = std::min(per_chunk, spec.k - first);
      std::vector<std::byte>& buffer = buffers[current];
      buffer.resize(static_cast<std::size_t>(buffer_records * stride));
      filler.fill(first, count, buffer.data());
      if (pending.valid()) pending.get();
      const std::byte* data = buffer.data();
      const std::int64_t offset = kHeaderBytes + first * stride;
      pending = std::async(std::launch::async,
                           [&writer, data, offset, count, stride] { writer->write_at(offset, data, count * stride); });
      current ^= 1;
    }
    if (pending.valid()) pending.get();
    writer->sync_and_close();
  }
  output.commit();
  result.bytes = kHeaderBytes + spec.k * record_bytes<std::uint16_t>(spec.m);
  return result;
}

}  // namespace blockmm::tools
