// Host-side sequencing of the device build and symbolic phase (kernels in build_kernels.cuh).
#include "kernels/cuda/device_build.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "kernels/cuda/build_kernels.cuh"
#include "kernels/cuda/cuda_check.cuh"

namespace blockmm::kernels::cuda {
namespace {

// Bits that hold every value in [0, count): at least 1.
int bits_for(std::int64_t count) {
  int bits = 1;
  while (bits < 62 && (std::int64_t{1} << bits) < count) ++bits;
  return bits;
}

// CUB's temporary storage, grown on demand.
class CubScratch {
 public:
  void* get(std::size_t bytes) {
    if (bytes > buffer_.bytes()) buffer_ = DeviceArray<std::byte>(bytes);
    return buffer_.get();
  }

 private:
  DeviceArray<std::byte> buffer_;
};

template <typename T>
void zero(DeviceArray<T>& array, cudaStream_t stream) {
  if (array.bytes() > 0) BLOCKMM_CUDA_CHECK(cudaMemsetAsync(array.get(), 0, array.bytes(), stream));
}

// Exclusive sum of `count` int32 counts into `count + 1` pointers (the last one the total).
template <typename In, typename Out>
void exclusive_pointers(const In* counts, std::int64_t count, Out* pointers, CubScratch& scratch, cudaStream_t stream) {
  BLOCKMM_CUDA_CHECK(cudaMemsetAsync(pointers, 0, sizeof(Out), stream));
  if (count == 0) return;
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, counts, pointers + 1, count, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceScan::InclusiveSum(scratch.get(bytes), bytes, counts, pointers + 1, count, stream));
}

// Sorts (key, index) pairs by the key's low `bits` bits; the result is in the buffers' Current().
void sort_pairs(cub::DoubleBuffer<u64>& keys, cub::DoubleBuffer<std::int32_t>& values, std::int64_t count, int bits,
                CubScratch& scratch, cudaStream_t stream) {
  if (count < 2) return;
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, count, 0, bits, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.get(bytes), bytes, keys, values, count, 0, bits, stream));
}

}  // namespace

HugePageMemory::HugePageMemory(std::size_t bytes) {
  if (bytes == 0) return;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = nullptr;
  if (::posix_memalign(&memory, kHugePage, rounded) != 0) throw std::bad_alloc();
  (void)::madvise(memory, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages work too
  // Populated by the kernel where it can (Linux 5.14), else here; a huge page a call, so that the
  // process's memory map is never held for long: the CUDA context may be starting beside this,
  // mapping memory of its own.
  auto* page = static_cast<std::byte*>(memory);
  for (std::size_t at = 0; at < rounded; at += kHugePage) {
    bool populated = false;
#if defined(MADV_POPULATE_WRITE)
    populated = ::madvise(page + at, kHugePage, MADV_POPULATE_WRITE) == 0;
#endif
    if (!populated) std::memset(page + at, 0, kHugePage);
  }
  data_ = static_cast<std::byte*>(memory);
  bytes_ = rounded;
}

HugePageMemory::~HugePageMemory() { std::free(data_); }

RegisteredBuffer::RegisteredBuffer(HugePageMemory memory) : memory_(std::move(memory)) { register_memory(); }

RegisteredBuffer::RegisteredBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  try {
    memory_ = HugePageMemory(bytes);
  } catch (const std::bad_alloc&) {  // no aligned memory: cudaMallocHost below
  }
  if (register_memory()) return;
  fallback_ = PinnedBuffer(bytes);
  bytes_ = bytes;
}

bool RegisteredBuffer::register_memory() {
  if (memory_.get() == nullptr) return false;
  if (cudaHostRegister(memory_.get(), memory_.bytes(), cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // not the run's error: pinned otherwise, or left to the backend
    memory_ = HugePageMemory();
    return false;
  }
  registered_ = true;
  bytes_ = memory_.bytes();
  return true;
}

RegisteredBuffer::~RegisteredBuffer() {
  if (registered_) cudaHostUnregister(memory_.get());
}

int StagingBuffers::slots_for(std::int64_t input_bytes, int threads) {
  const std::int64_t pieces = (std::max<std::int64_t>(0, input_bytes) + kSlotBytes / 2 - 1) / (kSlotBytes / 2);
  return static_cast<int>(
      std::max<std::int64_t>(kCopyBackSlots, std::min<std::int64_t>({kReaders, std::max(1, threads), pieces})));
}

namespace {

// Reads the source with several threads into pinned slots, uploading each piece on the worker's
// stream while the worker reads the next: a slot holds two pieces, read and uploaded in turn, so
// that the reads run at the file's pace instead of waiting for each upload (bench/NOTES.md 17).
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
    *context.pin_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - pin_start).count();
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
  // start a team of all the cores in each of the 15 new readers, which cost E1 and E2 10-13 ms an
  // operand (bench/NOTES.md item 18). (Reader 0 is this thread, whose team exists already.)
  for (int w = 1; w < workers; ++w)
    threads.emplace_back([&work, w] {
      omp_set_num_threads(1);
      work(w);
    });
  work(0);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Blocks [first, first + count) of a per-block array (`per_block` elements each), copied on the device.
template <typename T>
DeviceArray<T> copy_blocks(const DeviceArray<T>& from, std::int64_t first, std::int64_t count, std::int64_t per_block,
                           cudaStream_t stream) {
  DeviceArray<T> to(static_cast<std::size_t>(count * per_block));
  if (count > 0)
    BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(to.get(), from.get() + first * per_block, to.bytes(), cudaMemcpyDeviceToDevice,
                                       stream));
  return to;
}

SymbolicOperands symbolic_view(const DeviceOperand& a, const DeviceOperand& b) {
  SymbolicOperands ops{};
  ops.a_row_ptr = a.d_row_ptr.get();
  ops.a_col = a.d_col.get();
  ops.a_masks = reinterpret_cast<const u64*>(a.d_masks.get());
  ops.b_row_ptr = b.d_row_ptr.get();
  ops.b_col = b.d_col.get();
  ops.b_masks = reinterpret_cast<const u64*>(b.d_masks.get());
  ops.b_row_begin = b.row_begin;
  ops.b_rows = b.rows_held();
  ops.m = a.shape.m;
  ops.mask_words = mask_words(a.shape.m);
  return ops;
}

// Block products of each A row (int64, rows entries), on the device.
DeviceArray<std::int64_t> row_products(const DeviceOperand& a, const DeviceOperand& b, CubScratch& scratch,
                                       cudaStream_t stream) {
  const std::int32_t rows = a.rows_held();
  DeviceArray<std::int64_t> per_row(static_cast<std::size_t>(rows));
  if (rows == 0) return per_row;
  if (a.blocks() == 0) {
    zero(per_row, stream);
    return per_row;
  }
  DeviceArray<std::int64_t> per_block(static_cast<std::size_t>(a.blocks()));
  products_per_block<<<grid_for(a.blocks()), 256, 0, stream>>>(symbolic_view(a, b), a.blocks(), per_block.get());
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, bytes, per_block.get(), per_row.get(), rows,
                                                     a.d_row_ptr.get(), a.d_row_ptr.get() + 1, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(scratch.get(bytes), bytes, per_block.get(), per_row.get(), rows,
                                                     a.d_row_ptr.get(), a.d_row_ptr.get() + 1, stream));
  return per_row;
}

// The rows whose block products lie in (lo, hi], ascending, on the device: one class of the
// symbolic phase.
struct RowClass {
  DeviceArray<std::int32_t> rows;
  std::int64_t count = 0;
};

struct ProductsWithin {
  const std::int64_t* products;
  std::int64_t lo, hi;
  __device__ bool operator()(std::int32_t r) const { return products[r] > lo && products[r] <= hi; }
};

RowClass select_rows(const DeviceArray<std::int64_t>& products, std::int32_t rows, std::int64_t lo, std::int64_t hi,
                     CubScratch& scratch, cudaStream_t stream) {
  RowClass selected;
  if (rows == 0) return selected;
  selected.rows = DeviceArray<std::int32_t>(static_cast<std::size_t>(rows));
  DeviceArray<std::int64_t> count(1);
  const thrust::counting_iterator<std::int32_t> row(0);
  const ProductsWithin within{products.get(), lo, hi};
  std::size_t bytes = 0;
  BLOCKMM_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, row, selected.rows.get(), count.get(), rows, within, stream));
  BLOCKMM_CUDA_CHECK(
      cub::DeviceSelect::If(scratch.get(bytes), bytes, row, selected.rows.get(), count.get(), rows, within, stream));
  selected.count = download_one(count.get(), stream);
  return selected;
}

std::int64_t sum(const DeviceArray<std::int64_t>& values, CubScratch& scratch, cudaStream_t stream) {
  if (values.size() == 0) return 0;
  DeviceArray<std::int64_t> total(1);
  std::size_t bytes = 0;
  const auto count = static_cast<std::int64_t>(values.size());
  BLOCKMM_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, values.get(), total.get(), count, stream));
  BLOCKMM_CUDA_CHECK(cub::DeviceReduce::Sum(scratch.get(bytes), bytes, values.get(), total.get(), count, stream));
  return download_one(total.get(), stream);
}

// The parts (batches) of a class's columns as one array, part p at part_first[p].
DeviceArray<std::int32_t> concatenate(std::vector<DeviceArray<std::int32_t>> parts,
                                      const std::vector<std::int64_t>& part_first, std::int64_t total,
                                      cudaStream_t stream) {
  if (parts.size() == 1) return std::move(parts[0]);
  DeviceArray<std::int32_t> all(static_cast<std::size_t>(total));
  for (std::size_t part = 0; part < parts.size(); ++part)
    if (parts[part].size() > 0)
      BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(all.get() + part_first[part], parts[part].get(), parts[part].bytes(),
                                         cudaMemcpyDeviceToDevice, stream));
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the parts go when this returns
  return all;
}

// Where each of a class's rows starts when their entries of `per_row` lie one after another:
// offsets[i] = the sum over the class's rows before row i, offsets[count] the total.
DeviceArray<std::int64_t> class_offsets(const std::int64_t* per_row, const RowClass& rows, CubScratch& scratch,
                                        cudaStream_t stream) {
  DeviceArray<std::int64_t> offsets(static_cast<std::size_t>(rows.count) + 1);
  DeviceArray<std::int64_t> gathered(static_cast<std::size_t>(rows.count));
  if (rows.count > 0) {
    gather_rows<<<grid_for(rows.count), 256, 0, stream>>>(per_row, rows.rows.get(), rows.count, gathered.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  exclusive_pointers(gathered.get(), rows.count, offsets.get(), scratch, stream);
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // `gathered` goes when this returns
  return offsets;
}

// Moves one class's columns (its rows' columns one after another, in row order) into the
// pattern at the row pointers.
void place_class(const std::int64_t* row_ptr, const RowClass& rows, const std::int64_t* tiles, const std::int32_t* from,
                 std::int32_t* cols, CubScratch& scratch, cudaStream_t stream) {
  const DeviceArray<std::int64_t> source = class_offsets(tiles, rows, scratch, stream);
  place_rows<<<grid_for(rows.count * 32), 256, 0, stream>>>(row_ptr, rows.rows.get(), rows.count, source.get(), from, cols);
  BLOCKMM_CUDA_CHECK(cudaGetLastError());
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // source goes when this returns
}

}  // namespace

std::int64_t device_build_bytes(const RecordSource& records, const OperandSpec& spec) {
  const std::int64_t n = records.size();
  const std::int64_t m = records.shape().m;
  const std::int64_t rows = spec.row_end - spec.row_begin;
  const std::int64_t p = records.shape().block_rows();
  const std::int64_t sort = n * (2 * 8 + 2 * 4) + n * 16 + (std::int64_t{64} << 20);  // keys, indices, CUB
  const std::int64_t flags = n * (1 + 4 + 4);
  const std::int64_t result = n * (2 * m * m + 8 * mask_words(static_cast<std::int32_t>(m)) + 12) + 4 * (rows + 1) +
                              (spec.role == OperandRole::right ? 4 * (p + 1) + 8 * n : 0);
  return n * records.stride() + sort + flags + result;
}

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
    *context.read_upload_seconds += std::chrono::duration<double>(uploaded - start).count();

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
  const HugePageVector<std::int32_t> row_ptr = download_rows(d.d_row_ptr.get(), std::int64_t{rows} + 1, stream);
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
    const HugePageVector<std::int32_t> col_ptr = download_rows(d.d_col_ptr.get(), std::int64_t{p} + 1, stream);
    d.col_ptr.assign(col_ptr.begin(), col_ptr.end());
  }
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (context.device_seconds != nullptr)
    *context.device_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - uploaded).count();
  return operand;
}

std::unique_ptr<DeviceOperand> upload_host_operand(const BlockMatrix& matrix, OperandRole role, cudaStream_t stream) {
  auto operand = std::make_unique<DeviceOperand>();
  DeviceOperand& d = *operand;
  d.shape = matrix.shape;
  d.row_begin = matrix.row_begin;
  d.row_end = matrix.row_end;
  d.blocks_ = matrix.blocks();
  d.row_ptr.assign(matrix.row_ptr.begin(), matrix.row_ptr.end());
  const std::vector<std::int32_t> row_ptr(matrix.row_ptr.begin(), matrix.row_ptr.end());
  d.d_row_ptr = upload(row_ptr.data(), static_cast<std::int64_t>(row_ptr.size()), stream);
  d.d_col = upload(matrix.col.data(), static_cast<std::int64_t>(matrix.col.size()), stream);
  d.d_values = upload(matrix.values.data(), static_cast<std::int64_t>(matrix.values.size()), stream);
  d.d_masks = upload(matrix.masks.data(), static_cast<std::int64_t>(matrix.masks.size()), stream);
  if (role == OperandRole::right) {
    d.col_ptr.assign(matrix.col_ptr.begin(), matrix.col_ptr.end());
    const std::vector<std::int32_t> col_ptr(matrix.col_ptr.begin(), matrix.col_ptr.end());
    d.d_col_ptr = upload(col_ptr.data(), static_cast<std::int64_t>(col_ptr.size()), stream);
    d.d_csc_row = upload(matrix.csc_row.data(), static_cast<std::int64_t>(matrix.csc_row.size()), stream);
    d.d_csc_block = upload(matrix.csc_block.data(), static_cast<std::int64_t>(matrix.csc_block.size()), stream);
  }
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors are pageable and temporary
  return operand;
}

std::int64_t device_block_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream) {
  const std::int32_t rows = a.rows_held();
  if (rows == 0 || a.blocks() == 0) return 0;
  CubScratch scratch;
  return sum(row_products(a, b, scratch, stream), scratch, stream);
}

std::vector<std::int64_t> device_row_products(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream) {
  CubScratch scratch;
  DeviceArray<std::int64_t> per_row = row_products(a, b, scratch, stream);
  return download(per_row.get(), a.rows_held(), stream);
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

std::unique_ptr<DevicePattern> device_symbolic(const DeviceOperand& a, const DeviceOperand& b, std::int64_t batch_bytes,
                                               cudaStream_t stream) {
  const std::int32_t rows = a.rows_held();
  const std::int32_t p = a.shape.block_rows();
  const std::int64_t words = (std::int64_t{p} + 63) / 64;
  const SymbolicOperands ops = symbolic_view(a, b);
  CubScratch scratch;
  OutputLayout layout;
  layout.row_begin = a.row_begin;
  layout.row_end = a.row_end;

  // Each row's block products decide its method: a bitset of the row's columns when the
  // products outnumber the bitset's words (dense rows), else the products' columns sorted.
  // Everything of one entry a row stays on the device (a million rows cost E1 ~40 ms of host
  // arrays and copies: bench/NOTES.md 17-18); the host sees counts and the row pointers.
  const DeviceArray<std::int64_t> products = row_products(a, b, scratch, stream);
  const std::int64_t heavy_at = std::max<std::int64_t>(64, 2 * words);
  const RowClass light = select_rows(products, rows, 0, heavy_at, scratch, stream);
  const RowClass heavy = select_rows(products, rows, heavy_at, std::numeric_limits<std::int64_t>::max(), scratch, stream);
  DeviceArray<std::int64_t> tiles(static_cast<std::size_t>(rows));  // each row's tile count
  zero(tiles, stream);

  // Light rows, in batches of consecutive rows whose products fit the batch (16 bytes each:
  // keys and the sort's second buffer); a longer single row is a batch alone.
  DeviceArray<std::int32_t> light_cols;
  if (light.count > 0) {
    const std::int64_t cap = std::max<std::int64_t>(1, batch_bytes / 16);
    // first[i]: the products of the light rows before light row i (where its keys go).
    const DeviceArray<std::int64_t> first = class_offsets(products.get(), light, scratch, stream);
    // Batch b is light rows [cut[b], cut[b + 1]), its keys first[cut[b]] .. first[cut[b + 1]]:
    // one batch when every product fits, else cut on the host from the offsets.
    std::vector<std::int64_t> cut{0}, cut_first{0};
    const std::int64_t total = download_one(first.get() + light.count, stream);
    if (total <= cap) {
      cut.push_back(light.count);
      cut_first.push_back(total);
    } else {
      const std::vector<std::int64_t> offsets = download(first.get(), light.count + 1, stream);
      for (std::int64_t i0 = 0; i0 < light.count;) {
        std::int64_t i1 = i0 + 1;
        while (i1 < light.count && offsets[i1 + 1] - offsets[i0] <= cap) ++i1;
        cut.push_back(i1);
        cut_first.push_back(offsets[i1]);
        i0 = i1;
      }
    }
    std::vector<DeviceArray<std::int32_t>> parts;
    std::vector<std::int64_t> part_first;  // offset of each part in the concatenation
    std::int64_t light_total = 0;
    for (std::size_t batch = 0; batch + 1 < cut.size(); ++batch) {
      const auto batch_rows = static_cast<std::int32_t>(cut[batch + 1] - cut[batch]);
      const std::int32_t* batch_row_ids = light.rows.get() + cut[batch];
      const std::int64_t batch_products = cut_first[batch + 1] - cut_first[batch];
      const int col_bits = bits_for(p);
      const int index_bits = bits_for(std::int64_t{batch_rows} + 1);
      const u64 sentinel = (u64{1} << (index_bits + col_bits)) - 1;
      DeviceArray<u64> keys(static_cast<std::size_t>(batch_products)), keys_alt(static_cast<std::size_t>(batch_products));
      expand_light_rows<<<grid_for(std::int64_t{batch_rows} * 32), 256, 0, stream>>>(
          ops, batch_row_ids, batch_rows, first.get() + cut[batch], cut_first[batch], col_bits, sentinel, keys.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
      cub::DoubleBuffer<u64> buffer(keys.get(), keys_alt.get());
      std::size_t bytes = 0;
      BLOCKMM_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, buffer, batch_products, 0, index_bits + col_bits, stream));
      BLOCKMM_CUDA_CHECK(
          cub::DeviceRadixSort::SortKeys(scratch.get(bytes), bytes, buffer, batch_products, 0, index_bits + col_bits, stream));
      u64* unique = buffer.Current() == keys.get() ? keys_alt.get() : keys.get();
      DeviceArray<std::int64_t> unique_count(1);
      BLOCKMM_CUDA_CHECK(cub::DeviceSelect::Unique(nullptr, bytes, buffer.Current(), unique, unique_count.get(),
                                                   batch_products, stream));
      BLOCKMM_CUDA_CHECK(cub::DeviceSelect::Unique(scratch.get(bytes), bytes, buffer.Current(), unique,
                                                   unique_count.get(), batch_products, stream));
      std::int64_t kept = download_one(unique_count.get(), stream);
      if (kept > 0 && download_one(unique + kept - 1, stream) == sentinel) --kept;
      DeviceArray<std::int32_t> cols(static_cast<std::size_t>(kept));
      DeviceArray<std::int64_t> starts(static_cast<std::size_t>(batch_rows) + 1);
      row_starts<<<grid_for(kept + 1), 256, 0, stream>>>(unique, kept, col_bits, std::int64_t{batch_rows}, nullptr,
                                                         starts.get());
      light_row_tiles<<<grid_for(batch_rows), 256, 0, stream>>>(starts.get(), batch_rows, batch_row_ids, tiles.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
      if (kept > 0) {
        light_columns<<<grid_for(kept), 256, 0, stream>>>(unique, kept, col_bits, cols.get());
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      }
      part_first.push_back(light_total);
      light_total += kept;
      parts.push_back(std::move(cols));
      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the batch's buffers go now
    }
    light_cols = concatenate(std::move(parts), part_first, light_total, stream);
  }

  // Heavy rows, in batches of bitsets within the batch scratch. B's rows as column bitsets let a
  // full-mask A block OR a whole row; built when they fit beside the batch.
  DeviceArray<std::int32_t> heavy_cols;
  if (heavy.count > 0) {
    const std::vector<std::int32_t> heavy_rows = download(heavy.rows.get(), heavy.count, stream);
    DeviceArray<u64> b_columns;
    const std::int64_t b_columns_bytes = std::int64_t{b.rows_held()} * words * 8;
    if (b_columns_bytes <= batch_bytes) {
      b_columns = DeviceArray<u64>(static_cast<std::size_t>(std::int64_t{b.rows_held()} * words));
      zero(b_columns, stream);
      if (b.rows_held() > 0) {
        b_row_columns<<<static_cast<unsigned int>(std::min<std::int64_t>(b.rows_held(), 1 << 16)), 128, 0, stream>>>(
            ops, words, b_columns.get());
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      }
    }
    constexpr int kThreads = 256;
    const std::size_t shared_bytes = static_cast<std::size_t>(words * 8);
    const bool use_shared = shared_bytes <= 48 * 1024;
    const std::int64_t batch_rows = std::max<std::int64_t>(1, batch_bytes / (words * 8));
    std::vector<DeviceArray<std::int32_t>> parts;
    std::vector<std::int64_t> part_first;
    std::int64_t heavy_total = 0;
    // A row of more than kLongRow blocks is cut into segments of kSegment blocks, a thread block
    // each; shorter rows (every row of the D cases) keep one thread block and a shared bitset.
    constexpr std::int64_t kLongRow = 16384;
    constexpr std::int32_t kSegment = 1024;
    auto row_blocks = [&](std::int32_t r) { return a.row_ptr[r + 1] - a.row_ptr[r]; };
    for (std::size_t i0 = 0; i0 < heavy_rows.size();) {
      // A batch: up to batch_rows consecutive heavy rows, all long or all not.
      const bool long_rows = row_blocks(heavy_rows[i0]) > kLongRow;
      std::size_t i1 = i0 + 1;
      while (i1 < heavy_rows.size() && static_cast<std::int64_t>(i1 - i0) < batch_rows &&
             (row_blocks(heavy_rows[i1]) > kLongRow) == long_rows)
        ++i1;
      const auto n = static_cast<std::int32_t>(i1 - i0);
      const std::int32_t* batch_row_ids = heavy.rows.get() + i0;
      DeviceArray<u64> bits(static_cast<std::size_t>(n * words));
      DeviceArray<std::int64_t> counts(static_cast<std::size_t>(n));
      // The launch's list of segments stays alive, here and on the device, until the download
      // below has waited for the stream.
      std::vector<HeavySegment> segments;
      DeviceArray<HeavySegment> d_segments;
      if (long_rows) {
        for (std::int32_t i = 0; i < n; ++i) {
          const std::int32_t r = heavy_rows[i0 + static_cast<std::size_t>(i)];
          for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; e += kSegment)
            segments.push_back({i, r, static_cast<std::int32_t>(e),
                                static_cast<std::int32_t>(std::min<std::int64_t>(e + kSegment, a.row_ptr[r + 1]))});
        }
        zero(bits, stream);
        d_segments = upload(segments.data(), static_cast<std::int64_t>(segments.size()), stream);
        heavy_row_segments<<<static_cast<unsigned int>(segments.size()), kThreads, 0, stream>>>(
            ops, d_segments.get(), words, b_columns.get(), bits.get());
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
        bitset_counts<kThreads><<<static_cast<unsigned int>(n), kThreads, 0, stream>>>(bits.get(), words, counts.get());
      } else {
        heavy_row_bitsets<kThreads><<<static_cast<unsigned int>(n), kThreads, use_shared ? shared_bytes : 0, stream>>>(
            ops, batch_row_ids, words, p, b_columns.get(), use_shared, bits.get(), counts.get());
      }
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
      scatter_rows<<<grid_for(n), 256, 0, stream>>>(counts.get(), batch_row_ids, n, tiles.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
      DeviceArray<std::int64_t> offset(static_cast<std::size_t>(n) + 1);
      exclusive_pointers(counts.get(), n, offset.get(), scratch, stream);
      const std::int64_t batch_total = download_one(offset.get() + n, stream);
      DeviceArray<std::int32_t> cols(static_cast<std::size_t>(batch_total));
      bitset_columns<kThreads><<<static_cast<unsigned int>(n), kThreads, 0, stream>>>(bits.get(), words, offset.get(),
                                                                                     cols.get());
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      part_first.push_back(heavy_total);
      heavy_total += batch_total;
      parts.push_back(std::move(cols));
      i0 = i1;
    }
    heavy_cols = concatenate(std::move(parts), part_first, heavy_total, stream);
  }

  // The pattern: row pointers on both sides, the columns placed row by row.
  DeviceArray<std::int64_t> row_ptr(static_cast<std::size_t>(rows) + 1);
  exclusive_pointers(tiles.get(), rows, row_ptr.get(), scratch, stream);
  layout.row_ptr = download(row_ptr.get(), std::int64_t{rows} + 1, stream);
  auto pattern = std::make_unique<DevicePattern>(std::move(layout));
  pattern->block_products = sum(products, scratch, stream);
  pattern->d_row_ptr = std::move(row_ptr);
  if (heavy.count == 0) {
    pattern->d_col = std::move(light_cols);  // every row with tiles is light, in row order
  } else if (light.count == 0) {
    pattern->d_col = std::move(heavy_cols);
  } else {
    pattern->d_col = DeviceArray<std::int32_t>(static_cast<std::size_t>(pattern->layout().tiles()));
    place_class(pattern->d_row_ptr.get(), light, tiles.get(), light_cols.get(), pattern->d_col.get(), scratch, stream);
    place_class(pattern->d_row_ptr.get(), heavy, tiles.get(), heavy_cols.get(), pattern->d_col.get(), scratch, stream);
  }
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return pattern;
}

std::vector<std::int64_t> column_tile_splits(const DevicePattern& pattern, std::int32_t col_tiles, std::int32_t tile_cols,
                                             cudaStream_t stream) {
  const std::int32_t rows = pattern.layout().row_end - pattern.layout().row_begin;
  const std::int64_t items = std::int64_t{rows} * (col_tiles + 1);
  DeviceArray<std::int64_t> split(static_cast<std::size_t>(items));
  if (items > 0) {
    cuda::column_tile_splits<<<grid_for(items), 256, 0, stream>>>(pattern.d_row_ptr.get(), pattern.d_col.get(), rows,
                                                                 col_tiles, tile_cols, split.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  return download(split.get(), items, stream);
}

}  // namespace blockmm::kernels::cuda
