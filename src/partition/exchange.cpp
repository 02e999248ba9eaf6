#include "partition/exchange.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "operands/host_build.hpp"

namespace blockmm::partition {
namespace {

int owner_of(std::int32_t row, const std::vector<std::int32_t>& bounds) {
  // The last r with bounds[r] <= row (empty ranges share a bound; skip past them).
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), row) - bounds.begin()) - 1;
}

enum class Payload { records, index };

void count(const comm::Communicator& comm, const std::vector<std::int64_t>& sent,
           const std::vector<std::int64_t>& received, Payload payload, ExchangeCounters& counters) {
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;  // a rank's own share is copied, not sent
    counters.bytes_sent += sent[r];
    counters.bytes_received += received[r];
    const bool within = comm.same_node(r);
    if (payload == Payload::records)
      (within ? counters.record_bytes_within_node : counters.record_bytes_between_nodes) += sent[r];
    else
      (within ? counters.index_bytes_within_node : counters.index_bytes_between_nodes) += sent[r];
  }
}

// Sends records packed by destination; what arrives is this rank's records.
InputRecords exchange_records(MatrixShape shape, const LargeVector<std::byte>& send,
                              const std::vector<std::int64_t>& send_bytes, const comm::Communicator& comm,
                              ExchangeCounters& counters) {
  std::vector<std::int64_t> recv_bytes;
  InputRecords out;
  out.shape = shape;
  out.bytes = comm.exchange(send.data(), send_bytes, recv_bytes);
  count(comm, send_bytes, recv_bytes, Payload::records, counters);
  return out;
}

// gather_rows' second step: each bin of rows (bin b holds rows [bin_rows[b], bin_rows[b + 1]))
// in (row, column) order, through a copy of it: its keys counted into rows, each row's sorted by
// column (a few KiB each), then the records copied back in that order. The operand build then
// finds its rows sorted and reads them in order.
void sort_bins(GroupedRecords& out, const std::vector<std::int32_t>& bin_rows) {
  const std::int64_t stride = out.records.stride();
  std::byte* const dest = out.records.bytes.data();
  const auto bins = static_cast<std::int32_t>(bin_rows.size()) - 1;
  ParallelFailure failure;
  int column_bits = 0;
  while (column_bits < 31 && (std::int64_t{1} << column_bits) < out.records.shape.block_rows()) ++column_bits;
#pragma omp parallel num_threads(bins > 1 ? omp_get_max_threads() : 1)
  {
    LargeVector<std::byte> copy;
    std::vector<std::uint64_t> keys, scratch;  // (column, place in the copy)
    std::vector<std::int64_t> at;
#pragma omp for schedule(dynamic, 1)
    for (std::int32_t b = 0; b < bins; ++b) {
      if (failure.failed()) continue;
      failure.run([&] {
        const std::int32_t r0 = bin_rows[b], r1 = bin_rows[b + 1];
        const std::int64_t b0 = out.row_start[r0], n = out.row_start[r1] - b0;
        if (n == 0) return;
        if (n > std::int64_t{UINT32_MAX})  // a key keeps a record's place in 32 bits
          throw Error(ExitCode::resource, "more than 2^31 - 1 blocks on one rank; use more ranks");
        copy.resize(static_cast<std::size_t>(n * stride));
        std::memcpy(copy.data(), dest + b0 * stride, copy.size());
        keys.resize(static_cast<std::size_t>(n));
        at.resize(static_cast<std::size_t>(r1 - r0));
        for (std::int32_t i = r0; i < r1; ++i) at[i - r0] = out.row_start[i] - b0;
        for (std::int64_t q = 0; q < n; ++q) {
          const std::byte* record = copy.data() + q * stride;
          keys[at[record_row(record) - r0]++] =
              (static_cast<std::uint64_t>(record_col(record)) << 32) | static_cast<std::uint64_t>(q);
        }
        for (std::int32_t i = r0; i < r1; ++i) {
          std::uint64_t* row = keys.data() + (out.row_start[i] - b0);
          const std::int64_t length = out.row_start[i + 1] - out.row_start[i];
          if (std::is_sorted(row, row + length)) continue;
          if (scratch.size() < static_cast<std::size_t>(length)) scratch.resize(static_cast<std::size_t>(length));
          operands::sort_row_by_column(row, length, column_bits, scratch.data());
        }
        constexpr std::int64_t kAhead = 8;  // records read at random from the copy: prefetched
        for (std::int64_t e = 0; e < n; ++e) {
          if (e + kAhead < n) __builtin_prefetch(copy.data() + static_cast<std::int64_t>(keys[e + kAhead] & 0xffffffffu) * stride);
          std::memcpy(dest + (b0 + e) * stride, copy.data() + static_cast<std::int64_t>(keys[e] & 0xffffffffu) * stride,
                      static_cast<std::size_t>(stride));
        }
      });
    }
  }
  failure.rethrow_if_failed();
}

}  // namespace

RecordKeys record_keys(const InputRecords& records) {
  const std::int64_t total = records.size();
  RecordKeys keys(static_cast<std::size_t>(2 * total));
#pragma omp parallel for schedule(static) if (total > (1 << 16))
  for (std::int64_t q = 0; q < total; ++q) {
    keys[static_cast<std::size_t>(2 * q)] = record_row(records.record(q));
    keys[static_cast<std::size_t>(2 * q + 1)] = record_col(records.record(q));
  }
  return keys;
}

InputRecords redistribute_by_row(const InputRecords& records, const std::vector<std::int32_t>& bounds,
                                 const comm::Communicator& comm, ExchangeCounters& counters) {
  const int ranks = comm.size();
  const std::int64_t stride = records.stride();
  const std::int64_t total = records.size();
  // Pack by destination on every thread: per-thread counts, offsets, then parallel copies into
  // one buffer ordered by destination (and by record within a destination, so it is stable).
  const int parts = total < (1 << 16) ? 1 : omp_get_max_threads();
  std::vector<std::int64_t> at(static_cast<std::size_t>(parts) * ranks, 0);
  std::vector<int> dest(static_cast<std::size_t>(total));
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int t = 0; t < parts; ++t) {
    for (std::int64_t q = total * t / parts; q < total * (t + 1) / parts; ++q) {
      dest[q] = owner_of(record_row(records.record(q)), bounds);
      ++at[static_cast<std::size_t>(t) * ranks + dest[q]];
    }
  }
  std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks), 0);
  std::int64_t running = 0;
  for (int d = 0; d < ranks; ++d) {
    for (int t = 0; t < parts; ++t) {
      const std::int64_t c = at[static_cast<std::size_t>(t) * ranks + d];
      at[static_cast<std::size_t>(t) * ranks + d] = running;
      running += c;
      send_bytes[d] += c * stride;
    }
  }
  LargeVector<std::byte> send(static_cast<std::size_t>(total * stride));
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int t = 0; t < parts; ++t) {
    std::int64_t* next = at.data() + static_cast<std::size_t>(t) * ranks;
    for (std::int64_t q = total * t / parts; q < total * (t + 1) / parts; ++q)
      std::memcpy(send.data() + next[dest[q]]++ * stride, records.record(q), static_cast<std::size_t>(stride));
  }
  return exchange_records(records.shape, send, send_bytes, comm, counters);
}

InputRecords fetch_rows(const BlockMatrix& owned, const std::vector<char>& needed,
                        const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                        ExchangeCounters& counters) {
  const int ranks = comm.size();
  // 1. Ask each owner for the rows we need from its range (block-row ids, int32).
  std::vector<std::int32_t> wanted;
  std::vector<std::int64_t> ask_bytes(static_cast<std::size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    const std::size_t before = wanted.size();
    for (std::int32_t i = bounds[r]; i < bounds[r + 1]; ++i)
      if (needed[i]) wanted.push_back(i);
    ask_bytes[r] = static_cast<std::int64_t>((wanted.size() - before) * sizeof(std::int32_t));
  }
  std::vector<std::int64_t> asked_bytes;
  const LargeVector<std::byte> asked =
      comm.exchange(reinterpret_cast<const std::byte*>(wanted.data()), ask_bytes, asked_bytes);
  count(comm, ask_bytes, asked_bytes, Payload::index, counters);

  // 2. Answer with those rows' blocks, packed in parallel into one buffer ordered by requester.
  const std::int64_t asked_rows = static_cast<std::int64_t>(asked.size() / sizeof(std::int32_t));
  std::vector<std::int32_t> rows(static_cast<std::size_t>(asked_rows));
  if (asked_rows > 0) std::memcpy(rows.data(), asked.data(), asked.size());
  const std::int64_t stride = record_bytes<std::uint16_t>(owned.shape.m);
  const std::int64_t mm = owned.shape.block_values();
  std::vector<std::int64_t> row_at(static_cast<std::size_t>(asked_rows) + 1, 0);
  for (std::int64_t q = 0; q < asked_rows; ++q) {
    const std::int32_t r = rows[q] - owned.row_begin;
    row_at[q + 1] = row_at[q] + (owned.row_ptr[r + 1] - owned.row_ptr[r]) * stride;
  }
  std::vector<std::int64_t> reply_bytes(static_cast<std::size_t>(ranks), 0);
  {
    std::int64_t q = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t rows_for_r = asked_bytes[r] / static_cast<std::int64_t>(sizeof(std::int32_t));
      reply_bytes[r] = row_at[q + rows_for_r] - row_at[q];
      q += rows_for_r;
    }
  }
  LargeVector<std::byte> reply(static_cast<std::size_t>(row_at[asked_rows]));
#pragma omp parallel for schedule(dynamic, 16) if (asked_rows > 64)
  for (std::int64_t q = 0; q < asked_rows; ++q) {
    const std::int32_t i = rows[q];
    const std::int32_t r = i - owned.row_begin;
    std::byte* rec = reply.data() + row_at[q];
    for (std::int64_t b = owned.row_ptr[r]; b < owned.row_ptr[r + 1]; ++b, rec += stride) {
      set_record_index(rec, i, owned.col[b]);
      std::memcpy(rec + 8, owned.block_values(b), static_cast<std::size_t>(mm) * 2);
    }
  }
  return exchange_records(owned.shape, reply, reply_bytes, comm, counters);
}

GroupedRecords gather_rows(io::InputFile& file, const std::vector<char>& wanted,
                           const std::vector<std::int64_t>& row_counts) {
  const MatrixShape shape = file.header().shape();
  const std::int64_t stride = record_bytes<std::uint16_t>(shape.m);
  const std::int64_t k = file.header().k;
  const auto rows = static_cast<std::int32_t>(wanted.size());
  GroupedRecords out;
  out.records.shape = shape;
  out.row_start.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int32_t i = 0; i < rows; ++i) out.row_start[i + 1] = out.row_start[i] + (wanted[i] ? row_counts[i] : 0);
  const std::int64_t total = out.row_start[rows];
  out.records.bytes.resize(static_cast<std::size_t>(total * stride));
  std::byte* const dest = out.records.bytes.data();

  // Placing each record straight at its row scatters small writes over as many places as there
  // are rows, more than the caches hold (several times the cost of writing them in order). So two
  // steps: first into bins of consecutive rows (few enough that a thread's staging buffer of
  // each stays in its cache, written out a run of records at a time), then each bin, now a few
  // MiB, in (row, column) order.
  const std::int64_t run = std::max<std::int64_t>(1, 1024 / stride);  // records staged per bin
  const std::int64_t max_bins = std::max<std::int64_t>(1, (std::int64_t{128} << 10) / (run * stride));
  const std::int64_t bins_wanted =
      std::min<std::int64_t>(max_bins, std::max<std::int64_t>(1, total * stride / (std::int64_t{4} << 20)));
  const std::int64_t per_bin = std::max<std::int64_t>(1, (total + bins_wanted - 1) / bins_wanted);
  std::vector<std::int32_t> bin_of(static_cast<std::size_t>(rows), 0);
  std::vector<std::int32_t> bin_rows{0};  // bin b holds rows [bin_rows[b], bin_rows[b + 1])
  for (std::int32_t i = 0; i < rows; ++i) {
    if (out.row_start[i] - out.row_start[bin_rows.back()] >= per_bin &&
        static_cast<std::int64_t>(bin_rows.size()) < bins_wanted)
      bin_rows.push_back(i);
    bin_of[i] = static_cast<std::int32_t>(bin_rows.size()) - 1;
  }
  bin_rows.push_back(rows);
  const auto bins = static_cast<std::int32_t>(bin_rows.size()) - 1;
  const std::unique_ptr<std::atomic<std::int64_t>[]> next(new std::atomic<std::int64_t>[static_cast<std::size_t>(bins)]);
  for (std::int32_t b = 0; b < bins; ++b) next[b].store(out.row_start[bin_rows[b]], std::memory_order_relaxed);
  std::atomic<bool> overflow{false};
  const auto write_out = [&](std::int32_t b, const std::byte* records, std::int64_t count) {
    const std::int64_t at = next[b].fetch_add(count, std::memory_order_relaxed);
    if (at + count > out.row_start[bin_rows[b + 1]]) {
      overflow.store(true, std::memory_order_relaxed);
      return;
    }
    std::memcpy(dest + at * stride, records, static_cast<std::size_t>(count * stride));
  };

  // Step 1: the file in pieces of about 256 KiB, read by the threads into buffers that stay in
  // their caches, each wanted record staged in its bin's run.
  // (16 MiB where reads are not thread-safe, as HDF5's: each read call costs more there.)
  const std::int64_t per_piece =
      std::max<std::int64_t>(1, (file.concurrent_reads() ? std::int64_t{256} << 10 : std::int64_t{16} << 20) / stride);
  const std::int64_t pieces = (k + per_piece - 1) / per_piece;
  const int threads = file.concurrent_reads() && pieces > 1 ? omp_get_max_threads() : 1;
  ParallelFailure failure;
#pragma omp parallel num_threads(threads)
  {
    LargeVector<std::byte> piece, staged;
    std::vector<std::int64_t> staged_count;
    failure.run([&] {
      staged.resize(static_cast<std::size_t>(bins * run * stride));
      staged_count.assign(static_cast<std::size_t>(bins), 0);
    });
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t c = 0; c < pieces; ++c) {
      if (failure.failed()) continue;
      failure.run([&] {
        const std::int64_t first = c * per_piece;
        const std::int64_t count = std::min(per_piece, k - first);
        piece.resize(static_cast<std::size_t>(count * stride));
        file.read_records_into({first, count}, piece.data());
        for (std::int64_t q = 0; q < count; ++q) {
          const std::byte* record = piece.data() + q * stride;
          const std::int32_t i = record_row(record);
          if (!wanted[i]) continue;
          const std::int32_t b = bin_of[i];
          std::byte* bin = staged.data() + b * run * stride;
          std::memcpy(bin + staged_count[b] * stride, record, static_cast<std::size_t>(stride));
          if (++staged_count[b] == run) {
            write_out(b, bin, run);
            staged_count[b] = 0;
          }
        }
      });
    }
    if (!failure.failed())
      for (std::int32_t b = 0; b < bins; ++b)
        if (staged_count[b] > 0) write_out(b, staged.data() + b * run * stride, staged_count[b]);
  }
  failure.rethrow_if_failed();
  bool complete = !overflow.load();
  for (std::int32_t b = 0; b < bins && complete; ++b)
    complete = next[b].load(std::memory_order_relaxed) == out.row_start[bin_rows[b + 1]];
  if (!complete) throw InputError(file.path() + ": the file changed while it was read (its blocks per block-row differ)");

  sort_bins(out, bin_rows);
  return out;
}

void check_duplicates(const GroupedRecords& grouped, std::int32_t row_begin, std::int32_t row_end,
                      const DuplicateMessage& duplicate_message) {
  // Per row, the largest block-column that occurs twice (-1: none): neighbours in a sorted row.
  std::vector<std::int32_t> largest(static_cast<std::size_t>(std::max(0, row_end - row_begin)), -1);
#pragma omp parallel for schedule(dynamic, 64) if (grouped.records.size() > (1 << 16))
  for (std::int32_t i = row_begin; i < row_end; ++i)
    for (std::int64_t b = grouped.row_start[i + 1] - 1; b > grouped.row_start[i]; --b) {
      const std::int32_t col = record_col(grouped.records.record(b));
      if (col == record_col(grouped.records.record(b - 1))) {
        largest[i - row_begin] = col;
        break;
      }
    }
  for (std::int32_t i = row_end; i-- > row_begin;)
    if (largest[i - row_begin] >= 0) throw InputError(duplicate_message(i, largest[i - row_begin]));
}

GroupedRecords keep_rows(GroupedRecords grouped, const std::vector<char>& keep) {
  const auto rows = static_cast<std::int32_t>(keep.size());
  const std::int64_t stride = grouped.records.stride();
  bool all = true;
  for (std::int32_t i = 0; i < rows && all; ++i) all = keep[i] || grouped.row_start[i] == grouped.row_start[i + 1];
  if (all) return grouped;
  // Rows move towards the front only, in order: memmove in place.
  std::int64_t at = 0;
  std::byte* bytes = grouped.records.bytes.data();
  for (std::int32_t i = 0; i < rows; ++i) {
    const std::int64_t b0 = grouped.row_start[i], b1 = grouped.row_start[i + 1];
    grouped.row_start[i] = at;
    if (!keep[i] || b1 == b0) continue;
    if (at != b0) std::memmove(bytes + at * stride, bytes + b0 * stride, static_cast<std::size_t>((b1 - b0) * stride));
    at += b1 - b0;
  }
  grouped.row_start[rows] = at;
  grouped.records.bytes.resize(static_cast<std::size_t>(at * stride));
  return grouped;
}

std::vector<char> referenced_columns(const InputRecords& records, std::int32_t block_rows) {
  const std::unique_ptr<std::atomic<char>[]> flag(new std::atomic<char>[static_cast<std::size_t>(block_rows)]);
  for (std::int32_t j = 0; j < block_rows; ++j) flag[j].store(0, std::memory_order_relaxed);
  const std::int64_t count = records.size();
#pragma omp parallel for schedule(static) if (count > (1 << 16))
  for (std::int64_t q = 0; q < count; ++q) {
    const std::int32_t j = record_col(records.record(q));
    if (flag[j].load(std::memory_order_relaxed) == 0) flag[j].store(1, std::memory_order_relaxed);
  }
  std::vector<char> out(static_cast<std::size_t>(block_rows));
  for (std::int32_t j = 0; j < block_rows; ++j) out[j] = flag[j].load(std::memory_order_relaxed);
  return out;
}

std::int64_t first_duplicate_block(const InputRecords& records, const comm::Communicator& comm) {
  const int ranks = comm.size();
  std::vector<std::vector<std::uint64_t>> by_rank(static_cast<std::size_t>(ranks));
  for (std::int64_t q = 0; q < records.size(); ++q) {
    const std::uint64_t key = static_cast<std::uint64_t>(record_row(records.record(q))) << 32 |
                              static_cast<std::uint32_t>(record_col(records.record(q)));
    by_rank[key % static_cast<std::uint64_t>(ranks)].push_back(key);
  }
  std::vector<std::uint64_t> send;
  std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    send.insert(send.end(), by_rank[r].begin(), by_rank[r].end());
    send_bytes[r] = static_cast<std::int64_t>(by_rank[r].size() * sizeof(std::uint64_t));
  }
  std::vector<std::int64_t> recv_bytes;
  const LargeVector<std::byte> received = comm.exchange(reinterpret_cast<const std::byte*>(send.data()), send_bytes, recv_bytes);
  std::vector<std::uint64_t> keys(received.size() / sizeof(std::uint64_t));
  if (!keys.empty()) std::memcpy(keys.data(), received.data(), keys.size() * sizeof(std::uint64_t));
  std::sort(keys.begin(), keys.end());
  std::int64_t local = INT64_MAX;
  for (std::size_t e = 1; e < keys.size() && local == INT64_MAX; ++e)
    if (keys[e] == keys[e - 1]) local = static_cast<std::int64_t>(keys[e]);
  const std::int64_t global = -comm.max(-local);
  return global == INT64_MAX ? -1 : global;
}

}  // namespace blockmm::partition
