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
  // Backends call it on the thread that runs their numeric phase, so that an MPI-IO file never
  // needs more of MPI than that thread has (the cpu backend's team computes the next chunk beside
  // it: kernels/cpu/numeric.cpp).
  virtual void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) = 0;
};

}  // namespace blockmm
