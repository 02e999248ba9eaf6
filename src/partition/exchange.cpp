#include "partition/exchange.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <type_traits>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"

namespace blockmm::partition {
namespace {

int owner_of(std::int32_t row, const std::vector<std::int32_t>& bounds) {
  // The last r with bounds[r] <= row (empty ranges share a bound; skip past them).
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), row) - bounds.begin()) - 1;
}

// A record placed on a rank of the same node: where it is in the file, and its key.
struct NumberedKey {
  std::int64_t number;
  std::int32_t row;
  std::int32_t col;
};
static_assert(sizeof(NumberedKey) == 16 && std::is_trivially_copyable<NumberedKey>::value, "sent as bytes");

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

// All-to-all of trivially copyable items: send_items[r] for rank r, in rank order.
template <typename T>
std::vector<T> exchange_items(const std::vector<T>& send, const std::vector<std::int64_t>& send_items,
                              const comm::Communicator& comm, ExchangeCounters& counters) {
  std::vector<std::int64_t> send_bytes(send_items.size()), recv_bytes;
  for (std::size_t r = 0; r < send_items.size(); ++r) send_bytes[r] = send_items[r] * static_cast<std::int64_t>(sizeof(T));
  const LargeVector<std::byte> got = comm.exchange(reinterpret_cast<const std::byte*>(send.data()), send_bytes, recv_bytes);
  count(comm, send_bytes, recv_bytes, Payload::index, counters);
  std::vector<T> out(got.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), got.data(), out.size() * sizeof(T));
  return out;
}

// All-to-all of whole records (send_bytes[r] for rank r).
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

// Reads the records `numbers` (ascending) of `file` into dest.
void read_numbered(io::InputFile& file, std::vector<std::int64_t> numbers, std::byte* dest) {
  const auto count = static_cast<std::int64_t>(numbers.size());
  io::ListedRecordSource(file, std::move(numbers), InputRecords{}).read(0, count, dest);
}

// Runs the local part of a collective step on every rank and agrees on its outcome before any
// message is sent: a rank that failed to read would otherwise leave its peers waiting.
template <typename Work>
void agreed(const comm::Communicator& comm, Work&& work) {
  std::exception_ptr error;
  try {
    work();
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
}

}  // namespace

PlacedRecords place_by_row(io::InputFile& file, io::RecordRange share, const RecordKeys& keys,
                           const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                           ExchangeCounters& counters) {
  const int ranks = comm.size();
  const MatrixShape shape = file.header().shape();
  const std::int64_t stride = record_bytes<std::uint16_t>(shape.m);
  std::vector<NumberedKey> index_send;
  std::vector<std::int64_t> index_items(static_cast<std::size_t>(ranks), 0);
  LargeVector<std::byte> record_send;
  std::vector<std::int64_t> record_send_bytes(static_cast<std::size_t>(ranks), 0);
  const bool readable = file.readable_by_every_rank();
  const auto numbered = [&](int r) { return readable && comm.same_node(r); };
  agreed(comm, [&] {
    // The share's records ordered by destination (stably: ascending numbers within each).
    std::vector<std::int64_t> at(static_cast<std::size_t>(ranks) + 1, 0);
    std::vector<int> dest(static_cast<std::size_t>(share.count));
    for (std::int64_t q = 0; q < share.count; ++q) {
      dest[q] = owner_of(keys[2 * q], bounds);
      ++at[dest[q] + 1];
    }
    for (int r = 0; r < ranks; ++r) at[r + 1] += at[r];
    std::vector<std::int64_t> by_dest(static_cast<std::size_t>(share.count));
    std::vector<std::int64_t> next(at.begin(), at.end() - 1);
    for (std::int64_t q = 0; q < share.count; ++q) by_dest[next[dest[q]]++] = q;

    std::int64_t records_across = 0;
    for (int r = 0; r < ranks; ++r) {
      if (numbered(r)) {
        index_items[r] = at[r + 1] - at[r];
        for (std::int64_t e = at[r]; e < at[r + 1]; ++e) {
          const std::int64_t q = by_dest[e];
          index_send.push_back({share.first + q, keys[2 * q], keys[2 * q + 1]});
        }
      } else {
        records_across += at[r + 1] - at[r];
      }
    }
    // Only records for other nodes are read whole here, and only their bytes are sent.
    record_send.resize(static_cast<std::size_t>(records_across * stride));
    std::int64_t filled = 0;
    for (int r = 0; r < ranks; ++r) {
      if (numbered(r)) continue;
      std::vector<std::int64_t> numbers;
      numbers.reserve(static_cast<std::size_t>(at[r + 1] - at[r]));
      for (std::int64_t e = at[r]; e < at[r + 1]; ++e) numbers.push_back(share.first + by_dest[e]);
      record_send_bytes[r] = static_cast<std::int64_t>(numbers.size()) * stride;
      read_numbered(file, std::move(numbers), record_send.data() + filled);
      filled += record_send_bytes[r];
    }
  });

  PlacedRecords placed;
  std::vector<NumberedKey> listed = exchange_items(index_send, index_items, comm, counters);
  index_send = {};
  // Shares are contiguous and in rank order, so the senders' ascending lists arrive ascending;
  // sorted anyway should a launcher ever number ranks otherwise.
  const auto by_number = [](const NumberedKey& x, const NumberedKey& y) { return x.number < y.number; };
  if (!std::is_sorted(listed.begin(), listed.end(), by_number)) std::sort(listed.begin(), listed.end(), by_number);
  placed.numbers.reserve(listed.size());
  placed.keys.reserve(2 * listed.size());
  for (const NumberedKey& e : listed) {
    placed.numbers.push_back(e.number);
    placed.keys.push_back(e.row);
    placed.keys.push_back(e.col);
  }
  placed.received = exchange_records(shape, record_send, record_send_bytes, comm, counters);
  return placed;
}

RowIndex index_rows(const PlacedRecords& owned, std::int32_t row_begin, std::int32_t row_end,
                    const DuplicateMessage& duplicate_message) {
  const std::int64_t listed = static_cast<std::int64_t>(owned.numbers.size());
  const std::int64_t total = owned.size();
  if (static_cast<std::int64_t>(owned.keys.size()) != 2 * listed)
    throw std::logic_error("index_rows: the placed records' keys were not kept");
  const auto row_of = [&](std::int64_t s) {
    return s < listed ? owned.keys[2 * s] : record_row(owned.received.record(s - listed));
  };
  const auto col_of = [&](std::int64_t s) {
    return s < listed ? owned.keys[2 * s + 1] : record_col(owned.received.record(s - listed));
  };
  const std::int32_t rows = row_end - row_begin;
  RowIndex index;
  index.row_begin = row_begin;
  index.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t s = 0; s < total; ++s) {
    const std::int32_t i = row_of(s);
    if (i < row_begin || i >= row_end) throw std::logic_error("index_rows: a record outside the rank's rows");
    ++index.row_ptr[i - row_begin + 1];
  }
  for (std::int32_t r = 0; r < rows; ++r) index.row_ptr[r + 1] += index.row_ptr[r];
  index.source.resize(static_cast<std::size_t>(total));
  std::vector<std::int64_t> next(index.row_ptr.begin(), index.row_ptr.end() - 1);
  for (std::int64_t s = 0; s < total; ++s) index.source[next[row_of(s) - row_begin]++] = s;
  // Each row by block-column (std::sort does not allocate, so nothing throws in the region).
#pragma omp parallel for schedule(dynamic, 64) if (total > (1 << 16))
  for (std::int32_t r = 0; r < rows; ++r)
    std::sort(index.source.begin() + index.row_ptr[r], index.source.begin() + index.row_ptr[r + 1],
              [&](std::int64_t x, std::int64_t y) { return col_of(x) < col_of(y); });
  // The largest (i, j) that occurs twice, which is the one the host build names.
  for (std::int32_t r = rows - 1; r >= 0; --r)
    for (std::int64_t b = index.row_ptr[r + 1] - 1; b > index.row_ptr[r]; --b)
      if (col_of(index.source[b]) == col_of(index.source[b - 1]))
        throw InputError(duplicate_message(row_begin + r, col_of(index.source[b])));
  return index;
}

PlacedRecords fetch_rows(io::InputFile& file, const PlacedRecords& owned, const RowIndex& index,
                         const std::vector<char>& needed, const std::vector<std::int32_t>& bounds,
                         const comm::Communicator& comm, ExchangeCounters& counters) {
  const int ranks = comm.size();
  const MatrixShape shape = file.header().shape();
  const std::int64_t stride = record_bytes<std::uint16_t>(shape.m);
  const std::int64_t listed = static_cast<std::int64_t>(owned.numbers.size());

  // 1. Ask each owner for the rows we need from its range (block-row ids).
  std::vector<std::int32_t> wanted;
  std::vector<std::int64_t> ask_items(static_cast<std::size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    const std::size_t before = wanted.size();
    for (std::int32_t i = bounds[r]; i < bounds[r + 1]; ++i)
      if (needed[i]) wanted.push_back(i);
    ask_items[r] = static_cast<std::int64_t>(wanted.size() - before);
  }
  std::vector<std::int64_t> asked_items(static_cast<std::size_t>(ranks), 0);
  {
    // Each owner needs to know how many rows each rank asked for: the exchange's sizes say.
    std::vector<std::int64_t> ask_bytes(ask_items.size()), asked_bytes;
    for (int r = 0; r < ranks; ++r) ask_bytes[r] = ask_items[r] * static_cast<std::int64_t>(sizeof(std::int32_t));
    const LargeVector<std::byte> got =
        comm.exchange(reinterpret_cast<const std::byte*>(wanted.data()), ask_bytes, asked_bytes);
    count(comm, ask_bytes, asked_bytes, Payload::index, counters);
    for (int r = 0; r < ranks; ++r) asked_items[r] = asked_bytes[r] / static_cast<std::int64_t>(sizeof(std::int32_t));
    wanted.resize(got.size() / sizeof(std::int32_t));
    if (!wanted.empty()) std::memcpy(wanted.data(), got.data(), got.size());
  }

  // 2. Answer: a rank of this node gets the numbers of the blocks this rank holds by number;
  //    every other block travels as bytes (read from the file, or as received).
  std::vector<std::int64_t> number_send;
  std::vector<std::int64_t> number_items(static_cast<std::size_t>(ranks), 0);
  LargeVector<std::byte> record_send;
  std::vector<std::int64_t> record_send_bytes(static_cast<std::size_t>(ranks), 0);
  agreed(comm, [&] {
    std::vector<std::vector<std::int64_t>> reads(static_cast<std::size_t>(ranks)), copies(static_cast<std::size_t>(ranks));
    std::int64_t q = 0;
    for (int r = 0; r < ranks; ++r) {
      const bool same = file.readable_by_every_rank() && comm.same_node(r);
      const std::size_t numbers_before = number_send.size();
      for (std::int64_t end = q + asked_items[r]; q < end; ++q) {
        const std::int32_t i = wanted[q] - index.row_begin;
        if (i < 0 || i + 1 >= static_cast<std::int32_t>(index.row_ptr.size()))
          throw std::logic_error("fetch_rows: a row asked of a rank that does not own it");
        for (std::int64_t b = index.row_ptr[i]; b < index.row_ptr[i + 1]; ++b) {
          const std::int64_t s = index.source[b];
          if (s >= listed)
            copies[r].push_back(s - listed);
          else if (same)
            number_send.push_back(owned.numbers[s]);
          else
            reads[r].push_back(owned.numbers[s]);
        }
      }
      number_items[r] = static_cast<std::int64_t>(number_send.size() - numbers_before);
      std::sort(reads[r].begin(), reads[r].end());  // runs of consecutive records read at once
      record_send_bytes[r] = static_cast<std::int64_t>(reads[r].size() + copies[r].size()) * stride;
    }
    std::int64_t total = 0;
    for (int r = 0; r < ranks; ++r) total += record_send_bytes[r];
    record_send.resize(static_cast<std::size_t>(total));
    std::byte* at = record_send.data();
    for (int r = 0; r < ranks; ++r) {
      const auto read_count = static_cast<std::int64_t>(reads[r].size());
      read_numbered(file, std::move(reads[r]), at);
      at += read_count * stride;
      for (const std::int64_t c : copies[r]) {
        std::memcpy(at, owned.received.record(c), static_cast<std::size_t>(stride));
        at += stride;
      }
    }
  });

  PlacedRecords fetched;
  fetched.numbers = exchange_items(number_send, number_items, comm, counters);
  number_send = {};
  // Owners hold disjoint rows: the numbers are distinct; ascending keeps the reads sequential.
  std::sort(fetched.numbers.begin(), fetched.numbers.end());
  fetched.received = exchange_records(shape, record_send, record_send_bytes, comm, counters);
  return fetched;
}

namespace {

// Stable LSD radix sort of keys by their high 32 bits (a block-column below 2^column_bits), 8
// bits a pass; passes where every key has the same digit are skipped. `scratch` holds n keys.
void sort_by_column(std::uint64_t* keys, std::int64_t n, int column_bits, std::uint64_t* scratch) {
  if (n < 48) {
    std::sort(keys, keys + n);
    return;
  }
  std::uint64_t* from = keys;
  std::uint64_t* to = scratch;
  for (int shift = 32; shift < 32 + column_bits; shift += 8) {
    std::int64_t start[257] = {};
    for (std::int64_t e = 0; e < n; ++e) ++start[((from[e] >> shift) & 255) + 1];
    if (std::find(start + 1, start + 257, n) != start + 257) continue;
    for (int d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (std::int64_t e = 0; e < n; ++e) to[start[(from[e] >> shift) & 255]++] = from[e];
    std::swap(from, to);
  }
  if (from != keys) std::memcpy(keys, from, static_cast<std::size_t>(n) * sizeof *keys);
}

}  // namespace

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
  // are rows, more than the caches hold (D4: 2.5x the time of writing them in order). So two
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

  // Step 2: each bin in (row, column) order, through a copy of it: its keys counted into rows,
  // each row's sorted by column (a few KiB each), then the records copied back in that order.
  // The operand build then finds its rows sorted and reads them in order.
  int column_bits = 0;
  while (column_bits < 31 && (std::int64_t{1} << column_bits) < shape.block_rows()) ++column_bits;
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
          sort_by_column(row, length, column_bits, scratch.data());
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

}  // namespace blockmm::partition
