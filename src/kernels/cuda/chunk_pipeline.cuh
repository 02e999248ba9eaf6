// The numeric phase's streams, events and output buffers in one owner: chunk c computes on one
// stream into one of two device buffers while chunk c-1 is copied back on another, through a
// ring of pinned slots (the build's staging buffers: pinning costs about as much as copying, so
// no chunk-sized buffer is pinned), and handed to the sink piece by piece (16 MiB: four slots
// side by side), so that the file write overlaps the GPU work and each piece's copy-back runs
// while the piece before it is written. Both numeric paths (sparse_numeric.cuh,
// dense_numeric.cuh) run their chunks through it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/record_sink.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/staging_memory.cuh"
#include "kernels/cuda/device_memory.cuh"

namespace blockmm::kernels::cuda {

// Its destructor waits for both streams before any member (or anything handed to keep()) is
// freed, also when a sink write throws half way.
class ChunkPipeline {
 public:
  ChunkPipeline(const StagingBuffers& slots, int slot_count) : slots_(slots), slot_count_(std::max(1, slot_count)) {}
  // Waits for the streams before their buffers go. A destructor cannot report a failure, and a
  // failed stream has already failed a checked call of the run.
  ~ChunkPipeline() {
    (void)cudaStreamSynchronize(compute_.get());
    (void)cudaStreamSynchronize(copy_.get());
  }
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  cudaStream_t compute() const { return compute_.get(); }
  // Device memory (or a handle) that kernels on these streams use: freed only after them.
  template <typename T>
  T* keep(DeviceArray<T> array) {
    auto held = std::make_shared<DeviceArray<T>>(std::move(array));
    held_.push_back(held);
    return held->get();
  }
  template <typename T>
  T& keep_object(std::shared_ptr<T> object) {
    held_.push_back(object);
    return *object;
  }

  // A chunk of the output: tiles [first_tile, first_tile + tiles) of the panel.
  struct OutputChunk {
    std::int64_t first_tile, tiles;
  };
  // Where a run's time went besides the kernels (seconds): the host issuing the first chunk
  // (cuBLAS picks and loads its kernels there), the host waiting out the last chunk and its
  // copy-back, and the device's span from the first kernel to the last copy.
  struct Timeline {
    double first_issue = 0, last_drain = 0, device_span = 0;
  };
  const Timeline& timeline() const { return timeline_; }

  // enqueue(c, out) queues chunk c's compute on compute(), writing its records (`stride` bytes
  // each) to `out`.
  using Enqueue = std::function<void(std::size_t chunk, std::byte* out)>;
  void run(const std::vector<OutputChunk>& chunks, std::int64_t stride, RecordSink& sink, const NumericOptions& options,
           NumericReport& report, const Enqueue& enqueue);

 private:
  // Slots handed to the sink as one piece where they lie side by side: the writer splits a piece
  // among its threads (io/mapped_writer.hpp), and fewer, larger writes cost it less.
  static constexpr int kSlotsPerPiece = 4;
  // Whether the ring's slots lie side by side in runs of `group`, and make two pieces or more.
  bool neighbours(int group) const;

  const StagingBuffers& slots_;
  int slot_count_;
  Stream compute_;
  Stream copy_;
  DeviceArray<std::byte> d_out_[2];
  PinnedBuffer big_slots_[2];
  Event kernel_start_[2] = {Event(true), Event(true)};
  Event kernel_end_[2] = {Event(true), Event(true)};
  Event copied_[2];
  Event span_start_{true}, span_end_{true};
  Timeline timeline_;
  std::vector<std::shared_ptr<void>> held_;
};

using OutputChunk = ChunkPipeline::OutputChunk;

}  // namespace blockmm::kernels::cuda
