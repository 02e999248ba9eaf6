#include "partition/exchange.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace blockmm::partition {
namespace {

int owner_of(std::int32_t row, const std::vector<std::int32_t>& bounds) {
  // The last r with bounds[r] <= row (empty ranges share a bound; skip past them).
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), row) - bounds.begin()) - 1;
}

void count(const comm::Communicator& comm, const std::vector<std::int64_t>& sent,
           const std::vector<std::int64_t>& received, ExchangeCounters& counters) {
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    counters.bytes_sent += sent[r];
    counters.bytes_received += received[r];
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
  count(comm, send_bytes, recv_bytes, counters);
  return out;
}

}  // namespace

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
  count(comm, ask_bytes, asked_bytes, counters);

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

}  // namespace blockmm::partition
