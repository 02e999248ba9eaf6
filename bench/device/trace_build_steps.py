# Experiment aid (bench/NOTES.md item 17): a copy of device_build.cu with a clock that synchronises
# the stream between the build's steps and prints each step's time to stderr. For measuring only:
# edit a copy of the tree, python3 bench/device/trace_build_steps.py COPY/src/kernels/cuda/device_build.cu
# The anchors are lines of the build; when the code moves, move them.
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('''namespace blockmm::kernels::cuda {
namespace {
''', '''namespace blockmm::kernels::cuda {
namespace {
struct TraceClock {
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
  void operator()(cudaStream_t stream, const char* what) {
    cudaStreamSynchronize(stream);
    const auto n = std::chrono::steady_clock::now();
    std::fprintf(stderr, "trace %-28s %8.3f ms\\n", what, std::chrono::duration<double, std::milli>(n - t).count());
    t = n;
  }
};
#define TRACE(what) trace(stream, what)
''', 1)
s = s.replace('#include <thread>\n', '#include <thread>\n#include <cstdio>\n', 1)
marks = [
 ("  // 2. Sort keys (row, column) with the record index; all-zero flags; rows checked.\n", "read+upload"),
 ("  cub::DoubleBuffer<u64> key_buffer(keys.get(), keys_alt.get());\n", "alloc 5 + record_keys"),
 ("  if (count > 1) {\n    find_duplicates", "sort"),
 ("  const std::vector<u64> found = download(flags.get(), 2, stream);\n", "find_duplicates"),
 ("  // 3. Drop all-zero blocks; place the kept ones in CSR order; row pointers.\n", "flags checked"),
 ("  exclusive_pointers(kept.get(), count, position.get(), scratch, stream);\n", "alloc 3 + mark_kept"),
 ("  d.blocks_ = download_one(position.get() + count, stream);\n", "scan kept"),
 ("  if (count > 0) {\n    place_blocks", "alloc 3"),
 ("  d.d_row_ptr = DeviceArray<std::int32_t>(static_cast<std::size_t>(rows) + 1);\n", "place_blocks"),
 ("  BLOCKMM_CUDA_CHECK(cudaGetLastError());\n  // The sort buffers go before", "row_pointers kernel"),
 ("  // The sort buffers go before the values arrive.\n", "row pointers"),
 ("  // 4. Values in CSR order and the masks; then the records go.\n", "free 8"),
 ("  if (blocks > 0) {\n    const bool left", "alloc values+masks"),
 ("  const HugePageVector<std::int32_t> row_ptr = download_rows(", "gather_values"),
 ("  d_records = {};\n", "row_ptr download"),
 ("  // 5. CSC of the right operand: kept blocks sorted by (column, row).\n", "free records+source"),
]
for anchor, name in marks:
    assert anchor in s, anchor
    s = s.replace(anchor, '  TRACE("%s");\n' % name + anchor, 1)
s = s.replace('''  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (context.device_seconds != nullptr)''', '''  TRACE("csc");
  BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (context.device_seconds != nullptr)''', 1)
s = s.replace('''  CubScratch scratch;

  // 1. The records, uploaded while they are read.''', '''  CubScratch scratch;
  TraceClock trace;

  // 1. The records, uploaded while they are read.''', 1)
open(p, 'w').write(s)
