#include "partition/exchange.hpp"

#include <algorithm>
#include <cstring>

#include "partition/compress.hpp"

namespace blockmm::partition {
namespace {

int owner_of(std::int32_t row, const std::vector<std::int32_t>& bounds) {
  // The last r with bounds[r] <= row (empty ranges share a bound; skip past them).
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), row) - bounds.begin()) - 1;
}

InputRecords concatenate(MatrixShape shape, std::vector<std::vector<std::byte>>&& parts) {
  InputRecords out;
  out.shape = shape;
  std::size_t total = 0;
  for (const auto& part : parts) total += part.size();
  out.bytes.resize(total);
  std::size_t at = 0;
  for (auto& part : parts) {
    if (!part.empty()) std::memcpy(out.bytes.data() + at, part.data(), part.size());
    at += part.size();
    std::vector<std::byte>().swap(part);
  }
  return out;
}

void count(const comm::Communicator& comm, const std::vector<std::vector<std::byte>>& sent,
           const std::vector<std::vector<std::byte>>& received, ExchangeCounters& counters) {
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    counters.bytes_sent += static_cast<std::int64_t>(sent[r].size());
    counters.bytes_received += static_cast<std::int64_t>(received[r].size());
  }
}

}  // namespace

InputRecords redistribute_by_row(const InputRecords& records, const std::vector<std::int32_t>& bounds,
                                 const comm::Communicator& comm, ExchangeCounters& counters) {
  const int ranks = comm.size();
  const std::int64_t stride = records.stride();
  std::vector<std::int64_t> bytes_for(static_cast<std::size_t>(ranks), 0);
  std::vector<int> dest(static_cast<std::size_t>(records.size()));
  for (std::int64_t q = 0; q < records.size(); ++q) {
    dest[q] = owner_of(record_row(records.record(q)), bounds);
    bytes_for[dest[q]] += stride;
  }
  std::vector<std::vector<std::byte>> send(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) send[r].reserve(static_cast<std::size_t>(bytes_for[r]));
  for (std::int64_t q = 0; q < records.size(); ++q)
    send[dest[q]].insert(send[dest[q]].end(), records.record(q), records.record(q) + stride);
  auto received = comm.exchange(send);
  count(comm, send, received, counters);
  return concatenate(records.shape, std::move(received));
}

InputRecords fetch_rows(const BlockMatrix& owned, const std::vector<char>& needed,
                        const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                        ExchangeCounters& counters) {
  const int ranks = comm.size();
  // 1. Ask each owner for the rows we need from its range.
  std::vector<std::vector<std::byte>> requests(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (std::int32_t i = bounds[r]; i < bounds[r + 1]; ++i) {
      if (!needed[i]) continue;
      const auto* raw = reinterpret_cast<const std::byte*>(&i);
      requests[r].insert(requests[r].end(), raw, raw + sizeof i);
    }
  }
  auto asked = comm.exchange(requests);
  count(comm, requests, asked, counters);
  // 2. Answer with those rows' blocks.
  std::vector<std::vector<std::byte>> replies(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::int32_t> rows(asked[r].size() / sizeof(std::int32_t));
    if (!rows.empty()) std::memcpy(rows.data(), asked[r].data(), asked[r].size());
    replies[r] = pack_rows(owned, rows);
  }
  auto received = comm.exchange(replies);
  count(comm, replies, received, counters);
  return concatenate(owned.shape, std::move(received));
}

}  // namespace blockmm::partition
