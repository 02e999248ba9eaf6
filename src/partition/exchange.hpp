// Moving blocks between ranks: A and B records to the owner of their block-row, then each
// rank fetches only the B rows its A panel touches.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"

namespace blockmm::partition {

struct ExchangeCounters {
  std::int64_t bytes_sent = 0;      // to other ranks
  std::int64_t bytes_received = 0;  // from other ranks
};

// Sends every record to the rank whose range [bounds[r], bounds[r+1]) holds its block-row.
InputRecords redistribute_by_row(const InputRecords& records, const std::vector<std::int32_t>& bounds,
                                 const comm::Communicator& comm, ExchangeCounters& counters);

// The rows of B named in `needed` (a flag per block-row), gathered from their owners'
// `owned` matrices (rows [bounds[rank], bounds[rank+1])).
InputRecords fetch_rows(const BlockMatrix& owned, const std::vector<char>& needed,
                        const std::vector<std::int32_t>& bounds, const comm::Communicator& comm,
                        ExchangeCounters& counters);

}  // namespace blockmm::partition
