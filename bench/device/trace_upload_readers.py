# Experiment aid (bench/NOTES.md item 18): a copy of device_build.cu whose upload_records prints,
# as the largest over its readers, the time of each reader's CUDA set-up (cudaSetDevice, stream,
# events), when its first piece was read, its reads and its waits, and when all were done. For
# measuring only: edit a copy of the tree,
#   python3 bench/device/trace_upload_readers.py COPY/src/kernels/cuda/device_build.cu
# The anchors are lines of upload_records; when the code moves, move them.
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('#include <thread>\n', '#include <thread>\n#include <cstdio>\n', 1)
old = "  std::atomic<std::int64_t> next{0};\n"
assert old in s
s = s.replace(old, """  std::atomic<std::int64_t> next{0};
  const auto trace_t0 = std::chrono::steady_clock::now();
  std::vector<double> trace_setup(16, 0.0), trace_first(16, 0.0), trace_done(16, 0.0), trace_reads(16, 0.0), trace_waits(16, 0.0);
  auto trace_ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trace_t0).count(); };
""", 1)
old = """      Event uploaded[2];  // each half's last upload
"""
assert old in s
s = s.replace(old, """      Event uploaded[2];  // each half's last upload
      trace_setup[w] = trace_ms();
""", 1)
old = """          if (in_use[half]) BLOCKMM_CUDA_CHECK(cudaEventSynchronize(uploaded[half].get()));"""
assert old in s
s = s.replace(old, """          const double tw = trace_ms();
          if (in_use[half]) BLOCKMM_CUDA_CHECK(cudaEventSynchronize(uploaded[half].get()));
          trace_waits[w] += trace_ms() - tw;""", 1)
old = """          records.read(first, n, buffer);
"""
assert old in s
s = s.replace(old, """          const double tr = trace_ms();
          records.read(first, n, buffer);
          trace_reads[w] += trace_ms() - tr;
          if (trace_first[w] == 0) trace_first[w] = trace_ms();
""", 1)
old = """      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    } catch (...) {
      failed = true;"""
assert old in s
s = s.replace(old, """      BLOCKMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      trace_done[w] = trace_ms();
    } catch (...) {
      failed = true;""", 1)
old = "  for (std::thread& t : threads) t.join();\n  if (failure) std::rethrow_exception(failure);\n}\n"
assert old in s
s = s.replace(old, """  for (std::thread& t : threads) t.join();
  const double joined = trace_ms();
  auto mx = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::fprintf(stderr, "trace upload %lld bytes, %d workers: setup max %.2f ms, first piece read by %.2f, reads max %.2f, waits max %.2f, workers done by %.2f, joined %.2f ms\\n",
               (long long)(count * stride), workers, mx(trace_setup), mx(trace_first), mx(trace_reads), mx(trace_waits), mx(trace_done), joined);
  if (failure) std::rethrow_exception(failure);
}
""", 1)
open(p, 'w').write(s)
