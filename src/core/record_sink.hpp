// Where computed output records go. Kernels emit the C panel's tiles in order, in chunks, as
// uint32 COL380 records; the driver decides whether they land in a binary file, an HDF5 file
// or memory. Keeping this interface in core lets kernels stay free of I/O.
#pragma once

#include <cstddef>
#include <cstdint>

namespace blockmm {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Tiles [first_tile, first_tile + count) of this panel (numbered as in its TilePattern),
  // laid out as output records. Called with ascending, gap-free ranges, except where the backend
  // computes only the ranges NumericOptions::next_tiles hands out: then those, in that order.
  // (A ProductWriter also takes tiles of a neighbour's panel that this rank computed, numbered
  // from this panel's first tile: partition/row_sharing.hpp.)
  virtual void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) = 0;
  // Whether write() must be called on the thread that runs the backend's numeric phase (an MPI-IO
  // file where MPI granted less than MPI_THREAD_SERIALIZED); otherwise a backend may write from
  // a helper thread of its own, beside the compute, one call at a time.
  virtual bool writes_on_calling_thread() const { return false; }
};

}  // namespace blockmm
