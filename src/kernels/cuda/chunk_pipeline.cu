#include "kernels/cuda/chunk_pipeline.cuh"

#include <algorithm>
#include <chrono>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/seconds_since.hpp"

namespace blockmm::kernels::cuda {

void ChunkPipeline::run(const std::vector<OutputChunk>& chunks, std::int64_t stride, RecordSink& sink,
                        const NumericOptions& options, NumericReport& report, const Enqueue& enqueue) {
  std::int64_t buffer_tiles = 0;
  for (const OutputChunk& c : chunks) buffer_tiles = std::max(buffer_tiles, c.tiles);
  for (int s = 0; s < 2; ++s) d_out_[s] = DeviceArray<std::byte>(static_cast<std::size_t>(buffer_tiles * stride));
  // Host slots: the staging ring's slots, in pieces of kSlotsPerPiece neighbours where they lie
  // side by side (pinned as one region), else one each; or two record-sized buffers for records
  // larger than a slot. A larger piece is a larger write: its copy is split among the writer's
  // threads once, where each write costs the writer a start of its threads and a page-table walk.
  std::vector<std::byte*> host_slots;
  std::int64_t slot_bytes = StagingBuffers::kSlotBytes;
  if (stride <= slot_bytes) {
    const int group = neighbours(kSlotsPerPiece) ? kSlotsPerPiece : 1;
    for (int s = 0; s + group <= slot_count_; s += group) host_slots.push_back(slots_.slot(s));
    slot_bytes *= group;
  } else {
    slot_bytes = stride;
    for (PinnedBuffer& big : big_slots_) {
      big = PinnedBuffer(static_cast<std::size_t>(stride));
      host_slots.push_back(big.get());
    }
  }
  const std::int64_t piece_tiles = slot_bytes / stride;
  std::vector<Event> piece_copied(host_slots.size());
  struct Pending {
    std::int64_t first_tile, tiles;
    int slot;
  };
  std::vector<Pending> pending;  // copies issued, not yet written: oldest first
  std::size_t next_slot = 0;

  const auto write_oldest = [&] {
    const Pending piece = pending.front();
    pending.erase(pending.begin());
    BLOCKMM_CUDA_CHECK(cudaEventSynchronize(piece_copied[piece.slot].get()));
    const auto start = std::chrono::steady_clock::now();
    sink.write(piece.first_tile, piece.tiles, host_slots[piece.slot]);
    report.sink_seconds += seconds_since(start);
    if (options.progress) options.progress(piece.first_tile + piece.tiles);
  };
  // Copies chunk c back piece by piece (the copy stream follows its kernels) and writes it.
  const auto drain_chunk = [&](std::size_t c) {
    const int buffer = static_cast<int>(c % 2);
    BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), kernel_end_[buffer].get(), 0));
    for (std::int64_t t = 0; t < chunks[c].tiles; t += piece_tiles) {
      const int slot = static_cast<int>(next_slot++ % host_slots.size());
      if (pending.size() == host_slots.size()) write_oldest();  // frees the oldest slot, this one
      const std::int64_t tiles = std::min(piece_tiles, chunks[c].tiles - t);
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(host_slots[slot], d_out_[buffer].get() + t * stride,
                                         static_cast<std::size_t>(tiles * stride), cudaMemcpyDeviceToHost, copy_.get()));
      BLOCKMM_CUDA_CHECK(cudaEventRecord(piece_copied[slot].get(), copy_.get()));
      pending.push_back({chunks[c].first_tile + t, tiles, slot});
    }
    BLOCKMM_CUDA_CHECK(cudaEventRecord(copied_[buffer].get(), copy_.get()));
    while (!pending.empty()) write_oldest();
    // A chunk of empty rows copies nothing: wait for its kernels before timing them.
    BLOCKMM_CUDA_CHECK(cudaEventSynchronize(kernel_end_[buffer].get()));
    float ms = 0;
    BLOCKMM_CUDA_CHECK(cudaEventElapsedTime(&ms, kernel_start_[buffer].get(), kernel_end_[buffer].get()));
    report.compute_seconds += ms / 1e3;
    ++report.chunks;
  };
  using Clock = std::chrono::steady_clock;
  if (!chunks.empty()) BLOCKMM_CUDA_CHECK(cudaEventRecord(span_start_.get(), compute_.get()));
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const int buffer = static_cast<int>(c % 2);
    // d_out_[buffer] was last read by the copies of chunk c-2.
    if (c >= 2) BLOCKMM_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copied_[buffer].get(), 0));
    BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_start_[buffer].get(), compute_.get()));
    const auto issue = Clock::now();
    enqueue(c, d_out_[buffer].get());
    if (c == 0) timeline_.first_issue += seconds_since(issue);
    BLOCKMM_CUDA_CHECK(cudaEventRecord(kernel_end_[buffer].get(), compute_.get()));
    if (c >= 1) drain_chunk(c - 1);  // while chunk c computes
  }
  if (chunks.empty()) return;
  const auto drain = Clock::now();
  drain_chunk(chunks.size() - 1);
  BLOCKMM_CUDA_CHECK(cudaEventRecord(span_end_.get(), copy_.get()));
  BLOCKMM_CUDA_CHECK(cudaEventSynchronize(span_end_.get()));
  timeline_.last_drain += seconds_since(drain);
  float ms = 0;
  BLOCKMM_CUDA_CHECK(cudaEventElapsedTime(&ms, span_start_.get(), span_end_.get()));
  timeline_.device_span += ms / 1e3;
}

bool ChunkPipeline::neighbours(int group) const {
  if (slot_count_ < 2 * group) return false;  // two pieces at least: one copied while the other is written
  for (int s = 0; s + group <= slot_count_; s += group)
    for (int k = 1; k < group; ++k)
      if (slots_.slot(s + k) != slots_.slot(s) + k * StagingBuffers::kSlotBytes) return false;
  return true;
}

}  // namespace blockmm::kernels::cuda
