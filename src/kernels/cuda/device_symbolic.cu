// Host-side sequencing of the exact symbolic phase on the device (kernels in
// symbolic_kernels.cuh): rows classed by their block products, light rows by sorted products,
// heavy rows by bitsets, in batches under the memory budget; the block-product counts; the dense
// path's column-tile splits.
#include "kernels/cuda/device_symbolic.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/cub_scratch.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/symbolic_kernels.cuh"

namespace blockmm::kernels::cuda {
namespace {

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
  // Everything of one entry a row stays on the device (with a million rows, host arrays and their
  // copies cost more than the phase's kernels); the host sees counts and the row pointers.
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
