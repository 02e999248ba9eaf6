#include "kernels/cuda/dense_numeric.cuh"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/dense_kernels.cuh"
#include "kernels/cuda/device_symbolic.cuh"
#include "kernels/cuda/device_memory.cuh"
#include "kernels/cuda/seconds_since.hpp"

namespace blockmm::kernels::cuda {

// The largest value of both operands' blocks (which int8 encoding is exact): one pass over
// their values at memory speed, small beside the GEMMs it chooses.
std::uint32_t operands_largest_value(const DeviceOperand& a, const DeviceOperand& b, cudaStream_t stream) {
  DeviceArray<unsigned int> largest(1);
  BLOCKMM_CUDA_CHECK(cudaMemsetAsync(largest.get(), 0, sizeof(unsigned int), stream));
  for (const DeviceOperand* operand : {&a, &b}) {
    const std::int64_t count = operand->blocks() * operand->shape.block_values();
    if (count == 0) continue;
    largest_value<<<std::min(grid_for(count / 8), 2048u), 256, 0, stream>>>(
        operand->d_values.get(), count, largest.get());
    BLOCKMM_CUDA_CHECK(cudaGetLastError());
  }
  unsigned int host = 0;
  BLOCKMM_CUDA_CHECK(cudaMemcpyAsync(&host, largest.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// Dense path: panels of A and B expanded to dense tiles (int8 planes, as few as the values
// allow, or float64: dense_kernels.cuh), multiplied by cuBLAS, and the pattern's tiles gathered
// back. Chunks are runs of whole block-rows, grouped into row tiles (dense_plan.hpp): the first
// chunk of a row tile expands its A tile and multiplies it by every B tile (each expanded once,
// or once for all where B stays resident) into the products of every B tile side by side; each
// chunk of the row tile then gathers its records from them.
void numeric_dense(const DeviceOperand& a, const DeviceOperand& b, const DevicePattern& pattern, const DensePlan& plan,
                   const TileParams& params, CublasSession& cublas, RecordSink& sink, const NumericOptions& options,
                   ChunkPipeline& pipeline, NumericReport& report, BackendSteps& steps) {
  const cudaStream_t compute = pipeline.compute();
  const int m = a.shape.m;
  const std::int64_t n = a.shape.n;
  const std::int32_t p = a.shape.block_rows();
  const std::int64_t stride = record_bytes<std::uint32_t>(m);
  const DenseEncoding encoding = plan.encoding;
  const bool planes = encoding != DenseEncoding::float64;  // int8 plane vectors
  const bool offset_sums = encoding == DenseEncoding::int8_planes;
  const int plane_count = planes_of(encoding);
  const auto padded = [&](std::int64_t x) { return planes ? pad_to_planes(x) : x; };
  const std::int64_t k_pitch = plan.k_pitch;
  const std::int32_t cols_per_tile = plan.cols_per_tile;
  const std::int32_t col_tiles = plan.col_tiles;
  const std::int64_t tile_cols_max = std::int64_t{cols_per_tile} * m;
  const OutputLayout& layout = pattern.layout();

  const auto setup_start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t>& chunk_row = plan.chunk_rows;
  std::vector<OutputChunk> chunks;
  for (std::size_t c = 0; c + 1 < chunk_row.size(); ++c)
    chunks.push_back({layout.row_ptr[chunk_row[c]], layout.row_ptr[chunk_row[c + 1]] - layout.row_ptr[chunk_row[c]]});
  // The row tile of each chunk.
  std::vector<std::int32_t> row_tile_of(chunks.size());
  for (std::size_t t = 0; t + 1 < plan.row_tile_chunks.size(); ++t)
    for (std::int32_t c = plan.row_tile_chunks[t]; c < plan.row_tile_chunks[t + 1]; ++c)
      row_tile_of[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(t);
  // The plan's workspace: only the encoding's set is non-empty.
  const DenseWorkspace& workspace = plan.workspace;
  const auto count = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  double* d_a = pipeline.keep(DeviceArray<double>(count(workspace.a_float64)));
  double* d_b = pipeline.keep(DeviceArray<double>(count(workspace.b_float64)));
  double* d_c = pipeline.keep(DeviceArray<double>(count(workspace.c_float64)));
  std::int8_t* d_a8 = pipeline.keep(DeviceArray<std::int8_t>(count(workspace.a_planes)));
  std::int8_t* d_b8 = pipeline.keep(DeviceArray<std::int8_t>(count(workspace.b_planes)));
  std::int32_t* d_c32 = pipeline.keep(DeviceArray<std::int32_t>(count(workspace.products)));
  std::int32_t* d_a_sums = pipeline.keep(DeviceArray<std::int32_t>(count(workspace.a_sums)));
  std::int32_t* d_b_sums = pipeline.keep(DeviceArray<std::int32_t>(count(workspace.b_sums)));
  std::int64_t* d_piece_sums = pipeline.keep(DeviceArray<std::int64_t>(count(workspace.piece_sums)));
  // Every (chunk, column tile)'s work units go up once; each row's tiles split at the column
  // tiles' edges (downloaded offsets) when B does not fit one tile.
  const std::vector<std::int64_t> split =
      col_tiles > 1 ? column_tile_splits(pattern, col_tiles, cols_per_tile, compute) : std::vector<std::int64_t>{};
  std::vector<WorkUnit> units;
  std::vector<std::int64_t> unit_start;  // per (chunk, column tile), then the end
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
      unit_start.push_back(static_cast<std::int64_t>(units.size()));
      for (std::int32_t r = chunk_row[c]; r < chunk_row[c + 1]; ++r) {
        const std::int64_t lo = col_tiles > 1 ? split[r * std::int64_t{col_tiles + 1} + jt] : layout.row_ptr[r];
        const std::int64_t hi = col_tiles > 1 ? split[r * std::int64_t{col_tiles + 1} + jt + 1] : layout.row_ptr[r + 1];
        for (std::int64_t t = lo; t < hi; t += kThreadsPerUnit)
          units.push_back({t, r, static_cast<std::int32_t>(std::min<std::int64_t>(kThreadsPerUnit, hi - t))});
      }
    }
  }
  unit_start.push_back(static_cast<std::int64_t>(units.size()));
  const auto units_of = [&](std::size_t c, std::int32_t jt) {  // [first, end) of (chunk, column tile)
    return std::make_pair(unit_start[c * col_tiles + jt], unit_start[c * col_tiles + jt + 1]);
  };
  const WorkUnit* d_units = pipeline.keep(upload(units.data(), static_cast<std::int64_t>(units.size()), compute));
  const std::int32_t* d_cols = pattern.d_col.get();
  const auto load_start = std::chrono::steady_clock::now();
  steps.numeric_dense_buffers.add(std::chrono::duration<double>(load_start - setup_start).count());
  CublasHandle& blas = cublas.attach(pipeline);
  steps.numeric_load_cublas.add(seconds_since(load_start));
  bool b_expanded = false;

  // The encoding of value 0 for the n real entries of `vectors` plane vectors (-128 in the
  // offset byte planes, 0 in the narrow ones), 0 for their padding (which then adds nothing to
  // the products or the sums).
  const auto clear_planes = [&](std::int8_t* planes_data, std::int64_t vectors) {
    BLOCKMM_CUDA_CHECK(cudaMemsetAsync(planes_data, offset_sums ? 0x80 : 0, count(vectors * k_pitch), compute));
    if (offset_sums && k_pitch > n)
      BLOCKMM_CUDA_CHECK(cudaMemset2DAsync(planes_data + n, count(k_pitch), 0, count(k_pitch - n), count(vectors), compute));
  };
  // One K piece of the int8 products of column tile jt: one GEMM a plane (the narrow encodings:
  // plane q of the A tile times plane q of the B tile into product q), or the byte planes' one
  // GEMM of the stacked planes. A piece is the same offset into every plane vector, the full
  // pitch their leading dimension.
  const auto multiply_piece = [&](std::int64_t rows_padded, std::int64_t cols_padded, const KPiece& piece,
                                  std::int32_t* products) {
    const int k = static_cast<int>(piece.length);
    if (encoding == DenseEncoding::int8_planes) {
      blas.multiply(static_cast<int>(2 * rows_padded), static_cast<int>(2 * cols_padded), k, d_a8 + piece.begin, k_pitch,
                    d_b8 + piece.begin, k_pitch, products);
      return;
    }
    for (int q = 0; q < plane_count; ++q)
      blas.multiply(static_cast<int>(rows_padded), static_cast<int>(cols_padded), k,
                    d_a8 + q * rows_padded * k_pitch + piece.begin, k_pitch,
                    d_b8 + q * cols_padded * k_pitch + piece.begin, k_pitch, products + q * rows_padded * cols_padded);
  };
  // Column tile jt's products at `at` (elements into the products, and into the piece sums):
  // every K piece but the last multiplied and added into the piece sums; the last one's products
  // are left for the gather (PieceSums), which adds the sums as it reads them.
  const auto multiply_pieces = [&](std::int64_t rows_padded, std::int64_t cols_padded, std::int64_t at) {
    const std::int64_t elements = products_of(encoding) * rows_padded * cols_padded;
    for (std::int32_t q = 0; q < plan.k_pieces; ++q) {
      multiply_piece(rows_padded, cols_padded, k_piece_at(plan, q), d_c32 + at);
      if (q + 1 == plan.k_pieces) break;
      add_piece<<<grid_for(elements / 4), 256, 0, compute>>>(d_c32 + at, elements, q == 0, d_piece_sums + at);
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    }
  };
  const auto piece_sums = [&](std::int64_t at) { return PieceSums{d_c32 + at, plan.k_pieces > 1 ? d_piece_sums + at : nullptr}; };

  // The row tile's A tile times every B tile that holds output of its chunks.
  const auto multiply_row_tile = [&](std::int32_t t) {
    const std::int32_t c0 = plan.row_tile_chunks[t], c1 = plan.row_tile_chunks[t + 1];
    const std::int32_t r0 = chunk_row[c0], r1 = chunk_row[c1];
    const std::int32_t tile_rows = (r1 - r0) * m;
    const std::int64_t rows_padded = padded(tile_rows);
    const std::int64_t a_blocks = a.row_ptr[r1] - a.row_ptr[r0];
    const auto scatter_a = [&](auto tile) {
      if (a_blocks > 0)
        scatter_a_tile<<<grid_for(a_blocks * m), 256, 0, compute>>>(params.a_row_ptr, params.a_col, params.a_values, m, r0,
                                                                    tile_rows, static_cast<std::int32_t>(a.row_ptr[r0]),
                                                                    a_blocks, tile);
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    };
    if (planes) {
      clear_planes(d_a8, plane_count * rows_padded);
      with_plane_vectors<false>(encoding, d_a8, k_pitch, rows_padded, scatter_a);
      if (offset_sums) {
        vector_sums<<<static_cast<unsigned int>(2 * rows_padded), 256, 0, compute>>>(d_a8, k_pitch, d_a_sums);
        BLOCKMM_CUDA_CHECK(cudaGetLastError());
      }
    } else {
      BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_a, 0, static_cast<std::size_t>(tile_rows) * n * sizeof(double), compute));
      scatter_a(Float64Tile{d_a, tile_rows});
    }
    for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
      bool output = false;  // in these columns, of any of the row tile's chunks
      for (std::int32_t c = c0; c < c1 && !output; ++c) output = units_of(c, jt).first != units_of(c, jt).second;
      if (!output) continue;
      const std::int32_t j0 = jt * cols_per_tile, j1 = std::min(p, j0 + cols_per_tile);
      const std::int32_t tile_cols = (j1 - j0) * m;
      const std::int64_t cols_padded = padded(tile_cols);
      if (!plan.b_resident || !b_expanded) {
        b_expanded = true;
        const std::int64_t b_entries = b.col_ptr[j1] - b.col_ptr[j0];
        const auto scatter_b = [&](auto tile) {
          if (b_entries > 0)
            scatter_b_tile<<<grid_for(b_entries * m), 256, 0, compute>>>(
                params.b_col_ptr, params.b_csc_row, params.b_csc_block, params.b_values, m, j0, tile_cols,
                static_cast<std::int32_t>(b.col_ptr[j0]), b_entries, tile);
          BLOCKMM_CUDA_CHECK(cudaGetLastError());
        };
        if (planes) {
          clear_planes(d_b8, plane_count * cols_padded);
          with_plane_vectors<true>(encoding, d_b8, k_pitch, cols_padded, scatter_b);
          if (offset_sums) {  // each column tile's sums kept for its gathers
            vector_sums<<<static_cast<unsigned int>(2 * cols_padded), 256, 0, compute>>>(
                d_b8, k_pitch, d_b_sums + 2 * jt * padded(tile_cols_max));
            BLOCKMM_CUDA_CHECK(cudaGetLastError());
          }
        } else {
          BLOCKMM_CUDA_CHECK(cudaMemsetAsync(d_b, 0, static_cast<std::size_t>(n) * tile_cols * sizeof(double), compute));
          scatter_b(Float64Tile{d_b, n});
        }
      }
      const std::int64_t at = jt * product_tile_stride(encoding, tile_rows, tile_cols_max);
      if (planes)
        multiply_pieces(rows_padded, cols_padded, at);
      else
        blas.multiply(tile_rows, tile_cols, static_cast<int>(n), d_a, d_b, d_c + at);
    }
  };

  pipeline.run(chunks, stride, sink, options, report, [&](std::size_t c, std::byte* out) {
    const std::int32_t t = row_tile_of[c];
    if (static_cast<std::int32_t>(c) == plan.row_tile_chunks[t]) multiply_row_tile(t);
    const std::int32_t r0 = chunk_row[plan.row_tile_chunks[t]], r1 = chunk_row[plan.row_tile_chunks[t + 1]];
    const std::int32_t tile_rows = (r1 - r0) * m;
    const std::int64_t rows_padded = padded(tile_rows);
    const OutputChunk& chunk = chunks[c];
    for (std::int32_t jt = 0; jt < col_tiles; ++jt) {
      const auto [u0, u1] = units_of(c, jt);
      if (u0 == u1) continue;  // no output tile of this chunk in these columns
      const std::int32_t j0 = jt * cols_per_tile, j1 = std::min(p, j0 + cols_per_tile);
      const std::int64_t cols_padded = padded(std::int64_t{j1 - j0} * m);
      const std::int64_t at = jt * product_tile_stride(encoding, tile_rows, tile_cols_max);
      const unsigned int grid = static_cast<unsigned int>(u1 - u0);
      const WorkUnit* chunk_units = d_units + u0;
      const std::int32_t* chunk_cols = d_cols + chunk.first_tile;
      const auto gather = [&](auto product) {
        gather_records<<<grid, kThreadsPerUnit, 0, compute>>>(chunk_units, chunk_cols, chunk.first_tile, product, r0, j0,
                                                             a.row_begin, m, out, params.zero_tiles);
      };
      if (encoding == DenseEncoding::int8_narrow) {
        gather(NarrowPlaneProduct{piece_sums(at), rows_padded});
      } else if (encoding == DenseEncoding::int8_split) {
        gather(SplitPlanesProduct{piece_sums(at), rows_padded, rows_padded * cols_padded});
      } else if (planes) {
        gather(Int8PlanesProduct{piece_sums(at), 2 * rows_padded, rows_padded, cols_padded, d_a_sums,
                                 d_b_sums + 2 * jt * padded(tile_cols_max), n});
      } else {
        gather(Float64Product{d_c + at, tile_rows});
      }
      BLOCKMM_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace blockmm::kernels::cuda
