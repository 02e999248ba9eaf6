// Host-side sequencing of the device build (kernels in build_kernels.cuh): records read into
// pinned slots and uploaded while the read goes on, sorted, checked and compressed on the device.
#include "kernels/cuda/device_build.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "kernels/cuda/build_kernels.cuh"
#include "kernels/cuda/cub_scratch.cuh"
#include "kernels/cuda/cuda_check.cuh"

namespace blockmm::kernels::cuda {
namespace {

// Sorts (key, index) pairs by the key's low `bits` bits; the result is in the buffers' Current().
void sort_pairs(cub::DoubleBuffer<u64>& keys, cub::DoubleBuffer<std::int32_t>& values, std::int64_t count, int bits,
                CubScratch& scratch, cudaStream_t stream) {
  if (count < 2) return;
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, count, 0, bits, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.get(bytes), bytes, keys, values, count, 0, bits, stream));
}

// Reads the source with several threads into pinned slots, uploading each piece on the worker's
// stream while the worker reads the next: a slot holds two pieces, read and uploaded in turn, so
// that the reads run at the file's pace instead of waiting for each upload.
// The device memory at `dest` receives every record in order.
void upload_records(RecordSource& records, std::byte* dest, const BuildContext& context) {
  const std::int64_t stride = records.stride();
  const std::int64_t count = records.size();
  if (count == 0) return;
  if (stride > StagingBuffers::kSlotBytes) {
    // One record larger than a slot (m > 2896): read the whole share into host memory instead.
    const InputRecords all = records.take();
    BLOCKMM_CUDA_CHECK(cudaMemcpy(dest, all.bytes.data(), all.bytes.size(), cudaMemcpyHostToDevice));
    return;
  }
  // Half a slot a piece where a record fits in half (m <= 1023); else one piece a slot, in turn.
  const int halves = stride <= StagingBuffers::kSlotBytes / 2 ? 2 : 1;
  const std::int64_t per_piece = std::max<std::int64_t>(1, StagingBuffers::kSlotBytes / halves / stride);
  const std::int64_t piece_bytes = per_piece * stride;
  const std::int64_t pieces = (count + per_piece - 1) / per_piece;
  const int workers = static_cast<int>(
      std::min<std::int64_t>({pieces, records.concurrent() ? std::max(1, context.threads) : 1, StagingBuffers::kReaders}));
  const auto pin_start = std::chrono::steady_clock::now();
  context.staging->reserve(workers);
  if (context.pin_seconds != nullptr)
    context.pin_seconds->add(std::chrono::duration<double>(std::chrono::steady_clock::now() - pin_start).count());
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto work = [&](int w) {
    try {
      BLOCKMM_CUDA_CHECK(cudaSetDevice(context.device));
      Stream stream;
      Event uploaded[2];  // each half's last upload
      bool in_use[2] = {false, false};
      std::byte* slot = context.staging->slot(w);
      try {
        int half = 0;
        for (std::int64_t piece = next++; piece < pieces && !failed; piece = next++) {
          if (in_use[half]) BLOCKMM_CUDA_CHECK(cudaEventSynchronize(uploaded[half].get()));
          std::byte* buffer = slot + half * piece_bytes;
          const std::int64_t first = piece * per_piece;
          const std::int64_t n = std::min(per_piece, count - first);
          records.read(first, n, buffer);
          BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(dest + first * stride, buffer, static_cast<std::size_t>(n * stride),
                                             cudaMemcpyHostToDevice, stream.get()));
          BLOCKMM_CUDA_CHECK(cudaEventRecord(uploaded[half].get(), stream.get()));
          in_use[half] = true;
          half = (half + 1) % halves;
        }
      } catch (...) {
        cudaStreamSynchronize(stream.get());  // never free the stream (or reuse the slot) under a copy
        throw;
      }
      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    } catch (...) {
      failed = true;
      const std::lock_guard<std::mutex> lock(failure_lock);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  // A reader checks its pieces' indices on its own thread: the check's OpenMP loop would otherwise
  // start a team of all the cores in each of the new readers, a cost that dominates the read of a
  // small operand. (Reader 0 is this thread, whose team exists already.)
  for (int w = 1; w < workers; ++w)
    threads.emplace_back([&work, w] {
      omp_set_num_threads(1);
      work(w);
    });
  work(0);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Blocks [first, first + count) of a per-block array (`per_block` elements each), copied into
// device memory (from the device, or from an operand's host memory).
template <typename T>
DeviceArray<T> copy_blocks(const DeviceArray<T>& from, std::int64_t first, std::int64_t count, std::int64_t per_block,
                           cudaStream_t stream) {
  DeviceArray<T> to(static_cast<std::size_t>(count * per_block));
  if (count > 0)
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(to.get(), from.get() + first * per_block, to.bytes(), cudaMemcpyDefault, stream));
  return to;
}

}  // namespace

std::unique_ptr<DeviceOperand> build_on_device(RecordSource& records, const OperandSpec& spec,
                                               const BuildContext& context, cudaStream_t stream) {
  auto operand = std::make_unique<DeviceOperand>();
  DeviceOperand& d = *operand;
  d.shape = records.shape();
  d.row_begin = spec.row_begin;
  d.row_end = spec.row_end;
  d.built_on_device = true;
  const std::int32_t m = d.shape.m;
  const std::int32_t p = d.shape.block_rows();
  const std::int32_t rows = d.rows_held();
  const std::int64_t count = records.size();
  const std::int64_t stride = records.stride();
  const int words = mask_words(m);
  if (count > std::int64_t{INT32_MAX})
    throw Error(ExitCode::resource, "more than 2^31 - 1 blocks on one rank; use more ranks");
  CubScratch scratch;

  // 1. The records, uploaded while they are read.
  const auto start = std::chrono::steady_clock::now();
  DeviceArray<std::byte> d_records(static_cast<std::size_t>(count * stride));
  upload_records(records, d_records.get(), context);
  const auto uploaded = std::chrono::steady_clock::now();
  if (context.read_upload_seconds != nullptr)
    context.read_upload_seconds->add(std::chrono::duration<double>(uploaded - start).count());

  // 2. Sort keys (row, column) with the record index; all-zero flags; rows checked.
  const int col_bits = bits_for(p);
  const int row_bits = bits_for(std::max(1, rows));
  DeviceArray<u64> keys(static_cast<std::size_t>(count)), keys_alt(static_cast<std::size_t>(count));
  DeviceArray<std::int32_t> index(static_cast<std::size_t>(count)), index_alt(static_cast<std::size_t>(count));
  DeviceArray<std::uint8_t> is_zero(static_cast<std::size_t>(count));
  DeviceArray<u64> flags(2);  // [0] misplaced record + 1, [1] last duplicate position + 1
  zero(flags, stream);
  if (count > 0) {
    record_keys<<<grid_for(count), 256, 0, stream>>>(d_records.get(), stride, count, m, spec.row_begin, spec.row_end,
                                                    col_bits, keys.get(), index.get(), is_zero.get(), flags.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  cub::DoubleBuffer<u64> key_buffer(keys.get(), keys_alt.get());
  cub::DoubleBuffer<std::int32_t> index_buffer(index.get(), index_alt.get());
  sort_pairs(key_buffer, index_buffer, count, row_bits + col_bits, scratch, stream);
  if (count > 1) {
    find_duplicates<<<grid_for(count), 256, 0, stream>>>(key_buffer.Current(), count, flags.get() + 1);
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  const std::vector<u64> found = download(flags.get(), 2, stream);
  if (found[0] != 0) {
    std::int32_t row = 0;
    BLOCKMM_CUDA_CHECK(cudaMemcpy(&row, d_records.get() + (found[0] - 1) * stride, sizeof row, cudaMemcpyDeviceToHost));
    throw Error(ExitCode::other, "internal error: block-row " + std::to_string(row) + " sent to the wrong rank");
  }
  if (found[1] != 0) {
    const u64 key = download_one(key_buffer.Current() + (found[1] - 1), stream);
    throw InputError(spec.duplicate_message(spec.row_begin + static_cast<std::int32_t>(key >> col_bits),
                                            static_cast<std::int32_t>(key & ((u64{1} << col_bits) - 1))));
  }

  // 3. Drop all-zero blocks; place the kept ones in CSR order; row pointers.
  DeviceArray<std::int32_t> kept(static_cast<std::size_t>(count)), position(static_cast<std::size_t>(count) + 1);
  if (count > 0) {
    mark_kept<<<grid_for(count), 256, 0, stream>>>(index_buffer.Current(), is_zero.get(), count, kept.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  exclusive_pointers(kept.get(), count, position.get(), scratch, stream);
  d.blocks_ = download_one(position.get() + count, stream);
  const std::int64_t blocks = d.blocks_;
  DeviceArray<std::int32_t> block_source(static_cast<std::size_t>(blocks)), block_row(static_cast<std::size_t>(blocks));
  d.d_col = DeviceArray<std::int32_t>(static_cast<std::size_t>(blocks));
  if (count > 0) {
    place_blocks<<<grid_for(count), 256, 0, stream>>>(key_buffer.Current(), index_buffer.Current(), kept.get(),
                                                     position.get(), count, col_bits, block_source.get(), d.d_col.get(),
                                                     block_row.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  d.d_row_ptr = DeviceArray<std::int32_t>(static_cast<std::size_t>(rows) + 1);
  row_starts<<<grid_for(count + 1), 256, 0, stream>>>(key_buffer.Current(), count, col_bits, std::int64_t{rows},
                                                      position.get(), d.d_row_ptr.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  // The sort buffers go before the values arrive.
  keys = {}, keys_alt = {}, index = {}, index_alt = {}, is_zero = {}, kept = {}, position = {};

  // 4. Values in CSR order and the masks; then the records go.
  d.d_values = DeviceArray<std::uint16_t>(static_cast<std::size_t>(blocks * d.shape.block_values()));
  d.d_masks = DeviceArray<std::uint64_t>(static_cast<std::size_t>(blocks * words));
  if (blocks > 0) {
    const bool left = spec.role == OperandRole::left;
    const auto words_kernel = [&](auto kernel, int block_words) {
      kernel<<<grid_for(blocks * block_words), 256, 0, stream>>>(d_records.get(), stride, block_source.get(), blocks, m,
                                                                left, d.d_values.get(),
                                                                reinterpret_cast<u64*>(d.d_masks.get()));
    };
    if (m == 2) {
      words_kernel(gather_value_words<1>, 1);
    } else if (m == 4) {
      words_kernel(gather_value_words<4>, 4);
    } else if (m == 8) {
      words_kernel(gather_value_words<16>, 16);
    } else {
      gather_values<<<grid_for(blocks, 128), 128, 0, stream>>>(d_records.get(), stride, block_source.get(), blocks, m,
                                                              words, left, d.d_values.get(),
                                                              reinterpret_cast<u64*>(d.d_masks.get()));
    }
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  const LargeVector<std::int32_t> row_ptr = download_rows(d.d_row_ptr.get(), std::int64_t{rows} + 1, stream);
  d.row_ptr.assign(row_ptr.begin(), row_ptr.end());
  d_records = {};
  block_source = {};

  // 5. CSC of the right operand: kept blocks sorted by (column, row).
  if (spec.role == OperandRole::right) {
    DeviceArray<u64> csc_key(static_cast<std::size_t>(blocks)), csc_key_alt(static_cast<std::size_t>(blocks));
    DeviceArray<std::int32_t> entry(static_cast<std::size_t>(blocks)), entry_alt(static_cast<std::size_t>(blocks));
    DeviceArray<std::int32_t> col_count(static_cast<std::size_t>(p));
    zero(col_count, stream);
    d.d_col_ptr = DeviceArray<std::int32_t>(static_cast<std::size_t>(p) + 1);
    d.d_csc_row = DeviceArray<std::int32_t>(static_cast<std::size_t>(blocks));
    if (blocks > 0) {
      csc_keys<<<grid_for(blocks), 256, 0, stream>>>(d.d_col.get(), block_row.get(), blocks, row_bits, csc_key.get(),
                                                    entry.get(), col_count.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    }
    cub::DoubleBuffer<u64> csc_buffer(csc_key.get(), csc_key_alt.get());
    cub::DoubleBuffer<std::int32_t> entry_buffer(entry.get(), entry_alt.get());
    sort_pairs(csc_buffer, entry_buffer, blocks, row_bits + col_bits, scratch, stream);
    if (blocks > 0) {
      csc_rows<<<grid_for(blocks), 256, 0, stream>>>(csc_buffer.Current(), blocks, row_bits, d.row_begin,
                                                    d.d_csc_row.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    }
    exclusive_pointers(col_count.get(), p, d.d_col_ptr.get(), scratch, stream);
    // The sorted entries are in one of the two buffers; keep that one.
    d.d_csc_block = entry_buffer.Current() == entry.get() ? std::move(entry) : std::move(entry_alt);
    const LargeVector<std::int32_t> col_ptr = download_rows(d.d_col_ptr.get(), std::int64_t{p} + 1, stream);
    d.col_ptr.assign(col_ptr.begin(), col_ptr.end());
  }
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (context.device_seconds != nullptr)
    context.device_seconds->add(std::chrono::duration<double>(std::chrono::steady_clock::now() - uploaded).count());
  return operand;
}

namespace {

// `count` elements copied from the host into a device array (uploaded on `stream`) or into pinned
// host memory that the GPUs read in place.
template <typename T>
DeviceArray<T> place(const T* host, std::int64_t count, bool in_host_memory, cudaStream_t stream) {
  if (!in_host_memory) return upload(host, count, stream);
  DeviceArray<T> array = DeviceArray<T>::in_host_memory(static_cast<std::size_t>(count));
  if (count > 0) std::memcpy(array.host_data(), host, static_cast<std::size_t>(count) * sizeof(T));
  return array;
}

}  // namespace

std::unique_ptr<DeviceOperand> upload_host_operand(const BlockMatrix& matrix, OperandRole role, bool in_host_memory,
                                                   cudaStream_t stream) {
  auto operand = std::make_unique<DeviceOperand>();
  DeviceOperand& d = *operand;
  d.shape = matrix.shape;
  d.row_begin = matrix.row_begin;
  d.row_end = matrix.row_end;
  d.blocks_ = matrix.blocks();
  d.in_host_memory = in_host_memory;
  d.row_ptr.assign(matrix.row_ptr.begin(), matrix.row_ptr.end());
  const std::vector<std::int32_t> row_ptr(matrix.row_ptr.begin(), matrix.row_ptr.end());
  const auto size = [](const auto& v) { return static_cast<std::int64_t>(v.size()); };
  d.d_row_ptr = place(row_ptr.data(), size(row_ptr), in_host_memory, stream);
  d.d_col = place(matrix.col.data(), size(matrix.col), in_host_memory, stream);
  d.d_values = place(matrix.values.data(), size(matrix.values), in_host_memory, stream);
  d.d_masks = place(matrix.masks.data(), size(matrix.masks), in_host_memory, stream);
  if (role == OperandRole::right) {
    d.col_ptr.assign(matrix.col_ptr.begin(), matrix.col_ptr.end());
    const std::vector<std::int32_t> col_ptr(matrix.col_ptr.begin(), matrix.col_ptr.end());
    d.d_col_ptr = place(col_ptr.data(), size(col_ptr), in_host_memory, stream);
    d.d_csc_row = place(matrix.csc_row.data(), size(matrix.csc_row), in_host_memory, stream);
    d.d_csc_block = place(matrix.csc_block.data(), size(matrix.csc_block), in_host_memory, stream);
  }
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors are pageable and temporary
  return operand;
}

std::unique_ptr<DeviceOperand> slice_device_rows(const DeviceOperand& a, std::int32_t row_begin, std::int32_t row_end,
                                                 cudaStream_t stream) {
  if (row_begin < a.row_begin || row_end > a.row_end || row_begin > row_end)
    throw Error(ExitCode::other, "internal error: rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                     ") asked of an operand holding [" + std::to_string(a.row_begin) + ", " +
                                     std::to_string(a.row_end) + ")");
  auto operand = std::make_unique<DeviceOperand>();
  DeviceOperand& d = *operand;
  d.shape = a.shape;
  d.row_begin = row_begin;
  d.row_end = row_end;
  d.built_on_device = a.built_on_device;
  const std::size_t r0 = static_cast<std::size_t>(row_begin - a.row_begin);
  const std::size_t r1 = static_cast<std::size_t>(row_end - a.row_begin);
  const std::int64_t first = a.row_ptr[r0];
  d.blocks_ = a.row_ptr[r1] - first;
  d.row_ptr.resize(r1 - r0 + 1);
  std::vector<std::int32_t> row_ptr(r1 - r0 + 1);
  for (std::size_t r = r0; r <= r1; ++r) {
    d.row_ptr[r - r0] = a.row_ptr[r] - first;
    row_ptr[r - r0] = static_cast<std::int32_t>(a.row_ptr[r] - first);
  }
  d.d_row_ptr = upload(row_ptr.data(), static_cast<std::int64_t>(row_ptr.size()), stream);
  d.d_col = copy_blocks(a.d_col, first, d.blocks_, 1, stream);
  d.d_values = copy_blocks(a.d_values, first, d.blocks_, a.shape.block_values(), stream);
  d.d_masks = copy_blocks(a.d_masks, first, d.blocks_, mask_words(a.shape.m), stream);
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // row_ptr (pageable, temporary) is uploaded
  return operand;
}

namespace {

// An operand's host memory is not copied: every GPU reads the same.
template <typename T>
DeviceArray<T> copy_between_devices(const DeviceArray<T>& from, int from_device, int to_device, cudaStream_t stream) {
  if (from.host_resident()) return from.share_host_memory();
  DeviceArray<T> to(from.size());
  if (from.size() > 0)
    BLOCKMM_CUDA_CHECK(cudaMemcpyPeerAsync(to.get(), to_device, from.get(), from_device, from.bytes(), stream));
  return to;
}

}  // namespace

std::unique_ptr<DeviceOperand> copy_device_operand(const DeviceOperand& from, int to_device, cudaStream_t stream) {
  if (from.device < 0) throw Error(ExitCode::other, "internal error: an operand whose GPU is not known");
  auto operand = std::make_unique<DeviceOperand>();
  DeviceOperand& d = *operand;
  d.device = to_device;
  d.shape = from.shape;
  d.row_begin = from.row_begin;
  d.row_end = from.row_end;
  d.blocks_ = from.blocks_;
  d.built_on_device = from.built_on_device;
  d.in_host_memory = from.in_host_memory;
  d.row_ptr = from.row_ptr;
  d.col_ptr = from.col_ptr;
  const int f = from.device;
  d.d_row_ptr = copy_between_devices(from.d_row_ptr, f, to_device, stream);
  d.d_col = copy_between_devices(from.d_col, f, to_device, stream);
  d.d_values = copy_between_devices(from.d_values, f, to_device, stream);
  d.d_masks = copy_between_devices(from.d_masks, f, to_device, stream);
  d.d_col_ptr = copy_between_devices(from.d_col_ptr, f, to_device, stream);
  d.d_csc_row = copy_between_devices(from.d_csc_row, f, to_device, stream);
  d.d_csc_block = copy_between_devices(from.d_csc_block, f, to_device, stream);
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return operand;
}

}  // namespace blockmm::kernels::cuda
