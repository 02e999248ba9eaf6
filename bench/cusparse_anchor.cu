// Anchor for the benchmarks: the same product through cuSPARSE's general SpGEMM, with the
// blocks expanded to element-level CSR in float64 (exact while sums stay below 2^53; cuSPARSE
// has no block or integer SpGEMM). Times the SpGEMM calls alone with CUDA events and prints
// one JSON line. Usage: cusparse_anchor A.bin B.bin
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#define CHECK_CUDA(call)                                                                       \
  do {                                                                                         \
    cudaError_t rc = (call);                                                                   \
    if (rc != cudaSuccess) {                                                                   \
      std::printf("{\"status\": \"cuda error\", \"call\": \"%s\", \"what\": \"%s\"}\n", #call, cudaGetErrorString(rc)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CHECK_SPARSE(call)                                                                     \
  do {                                                                                         \
    cusparseStatus_t rc = (call);                                                              \
    if (rc != CUSPARSE_STATUS_SUCCESS) {                                                       \
      std::printf("{\"status\": \"cusparse error\", \"call\": \"%s\", \"what\": \"%s\"}\n", #call, cusparseGetErrorString(rc)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

struct Csr {
  int n = 0;
  std::vector<int> ptr, col;
  std::vector<double> val;
};

Csr read_as_csr(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::printf("{\"status\": \"cannot open %s\"}\n", path);
    std::exit(2);
  }
  int header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  const int n = header[0], m = header[1], k = header[2];
  const std::size_t rec = 8 + 2 * static_cast<std::size_t>(m) * m;
  std::vector<char> raw(rec * static_cast<std::size_t>(k));
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  Csr csr;
  csr.n = n;
  std::vector<std::int64_t> count(static_cast<std::size_t>(n) + 1, 0);
  for (int q = 0; q < k; ++q) {
    int i;
    std::memcpy(&i, raw.data() + q * rec, 4);
    for (int r = 0; r < m; ++r) count[static_cast<std::size_t>(i) * m + r + 1] += m;
  }
  for (int r = 0; r < n; ++r) count[r + 1] += count[r];
  if (count[n] > 0x7fffffff) {
    std::printf("{\"status\": \"too many non-zeros for 32-bit indices\"}\n");
    std::exit(3);
  }
  csr.ptr.assign(count.begin(), count.end());
  csr.col.resize(count[n]);
  csr.val.resize(count[n]);
  std::vector<std::int64_t> next(count.begin(), count.end() - 1);
  for (int q = 0; q < k; ++q) {
    int i, j;
    std::memcpy(&i, raw.data() + q * rec, 4);
    std::memcpy(&j, raw.data() + q * rec + 4, 4);
    const auto* v = reinterpret_cast<const std::uint16_t*>(raw.data() + q * rec + 8);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < m; ++c) {
        const std::int64_t at = next[static_cast<std::size_t>(i) * m + r]++;
        csr.col[at] = j * m + c;
        csr.val[at] = v[r * m + c];
      }
  }
  // cuSPARSE wants sorted columns within a row.
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<int, double>> row;
    for (int e = csr.ptr[r]; e < csr.ptr[r + 1]; ++e) row.emplace_back(csr.col[e], csr.val[e]);
    std::sort(row.begin(), row.end());
    for (int e = csr.ptr[r]; e < csr.ptr[r + 1]; ++e) {
      csr.col[e] = row[e - csr.ptr[r]].first;
      csr.val[e] = row[e - csr.ptr[r]].second;
    }
  }
  return csr;
}

template <typename T>
T* to_device(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<std::size_t>(1, v.size()) * sizeof(T)));
  if (!v.empty()) CHECK_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cusparse_anchor A.bin B.bin\n");
    return 2;
  }
  const Csr a = read_as_csr(argv[1]);
  const Csr b = read_as_csr(argv[2]);
  const int n = a.n;
  cusparseHandle_t handle;
  CHECK_SPARSE(cusparseCreate(&handle));
  int *a_ptr = to_device(a.ptr), *a_col = to_device(a.col), *b_ptr = to_device(b.ptr), *b_col = to_device(b.col);
  double *a_val = to_device(a.val), *b_val = to_device(b.val);
  int* c_ptr = nullptr;
  CHECK_CUDA(cudaMalloc(&c_ptr, (n + 1) * sizeof(int)));
  cusparseSpMatDescr_t A, B, C;
  CHECK_SPARSE(cusparseCreateCsr(&A, n, n, static_cast<int64_t>(a.col.size()), a_ptr, a_col, a_val, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  CHECK_SPARSE(cusparseCreateCsr(&B, n, n, static_cast<int64_t>(b.col.size()), b_ptr, b_col, b_val, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  CHECK_SPARSE(cusparseCreateCsr(&C, n, n, 0, c_ptr, nullptr, nullptr, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  const double alpha = 1, beta = 0;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseSpGEMMDescr_t gemm;
  CHECK_SPARSE(cusparseSpGEMM_createDescr(&gemm));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  size_t size1 = 0, size2 = 0;
  void *buf1 = nullptr, *buf2 = nullptr;
  CHECK_SPARSE(cusparseSpGEMM_workEstimation(handle, op, op, &alpha, A, B, &beta, C, CUDA_R_64F,
                                             CUSPARSE_SPGEMM_DEFAULT, gemm, &size1, nullptr));
  CHECK_CUDA(cudaMalloc(&buf1, std::max<size_t>(1, size1)));
  CHECK_SPARSE(cusparseSpGEMM_workEstimation(handle, op, op, &alpha, A, B, &beta, C, CUDA_R_64F,
                                             CUSPARSE_SPGEMM_DEFAULT, gemm, &size1, buf1));
  CHECK_SPARSE(cusparseSpGEMM_compute(handle, op, op, &alpha, A, B, &beta, C, CUDA_R_64F, CUSPARSE_SPGEMM_DEFAULT, gemm,
                                      &size2, nullptr));
  CHECK_CUDA(cudaMalloc(&buf2, std::max<size_t>(1, size2)));
  CHECK_SPARSE(cusparseSpGEMM_compute(handle, op, op, &alpha, A, B, &beta, C, CUDA_R_64F, CUSPARSE_SPGEMM_DEFAULT, gemm,
                                      &size2, buf2));
  int64_t rows, cols, nnz;
  CHECK_SPARSE(cusparseSpMatGetSize(C, &rows, &cols, &nnz));
  int* c_col = nullptr;
  double* c_val = nullptr;
  CHECK_CUDA(cudaMalloc(&c_col, std::max<int64_t>(1, nnz) * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&c_val, std::max<int64_t>(1, nnz) * sizeof(double)));
  CHECK_SPARSE(cusparseCsrSetPointers(C, c_ptr, c_col, c_val));
  CHECK_SPARSE(cusparseSpGEMM_copy(handle, op, op, &alpha, A, B, &beta, C, CUDA_R_64F, CUSPARSE_SPGEMM_DEFAULT, gemm));
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  std::printf("{\"status\": \"%s\", \"spgemm_seconds\": %.6f, \"nnz_c\": %lld, \"nnz_a\": %zu, \"nnz_b\": %zu}\n",
              nnz > 0 || a.col.empty() || b.col.empty() ? "ok" : "empty result", ms / 1e3, static_cast<long long>(nnz),
              a.col.size(), b.col.size());
  return 0;
}
