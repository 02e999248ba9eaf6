// Can the input read hide CUDA's start (bench/NOTES.md item 17, #15)? Times, in one process:
// the context started on its own thread while 16 threads pread a file into pageable memory
// (transparent huge pages), then four ways to get those bytes to the device:
//   stage:    copy into 4 MiB pinned slots on 16 threads, each slot uploaded on its own stream
//   register: cudaHostRegister the pageable buffer, one upload, cudaHostUnregister
//   pageable: cudaMemcpy straight from the pageable buffer
// and the baseline the backend uses today: context first, then pread into pinned slots + upload.
//   nvcc -O2 -std=c++17 -o overlap_probe overlap_probe.cu -lpthread
//   ./overlap_probe FILE baseline|stage|register|pageable
// Time the whole process from outside too: exit tears down what was pinned.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "probe_util.cuh"

namespace {
using probe::check;
using probe::now;
constexpr std::size_t kSlot = std::size_t{4} << 20;
constexpr int kThreads = 16;

template <typename F>
void on_threads(F f) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(f, t);
  for (auto& t : threads) t.join();
}

// Pieces of kSlot bytes taken in turn; f(worker, offset, bytes).
template <typename F>
void pieces(std::size_t size, F f) {
  std::atomic<std::size_t> next{0};
  on_threads([&](int w) {
    for (std::size_t off = next.fetch_add(kSlot); off < size; off = next.fetch_add(kSlot))
      f(w, off, std::min(kSlot, size - off));
  });
}

void read_all(int fd, std::byte* dst, std::size_t size) {
  pieces(size, [&](int, std::size_t off, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd, dst + off + done, n - done, static_cast<off_t>(off + done));
      if (got <= 0) std::exit(2);
      done += static_cast<std::size_t>(got);
    }
  });
}

// Slots are pinned and uploaded as in the backend's upload_records: a stream per worker.
void through_slots(std::byte* device, std::size_t size, const std::function<void(std::byte*, std::size_t, std::size_t)>& fill) {
  std::vector<void*> slots(kThreads);
  for (auto& s : slots) check(cudaMallocHost(&s, kSlot), "cudaMallocHost");
  std::vector<cudaStream_t> streams(kThreads);
  for (auto& s : streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  pieces(size, [&](int w, std::size_t off, std::size_t n) {
    check(cudaStreamSynchronize(streams[w]), "sync");
    fill(static_cast<std::byte*>(slots[w]), off, n);
    check(cudaMemcpyAsync(device + off, slots[w], n, cudaMemcpyHostToDevice, streams[w]), "upload");
  });
  for (auto& s : streams) check(cudaStreamSynchronize(s), "sync");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[2];
  const int fd = ::open(argv[1], O_RDONLY);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return 2;
  const auto size = static_cast<std::size_t>(st.st_size);
  const double start = now();
  probe::Laps lap(34);
  std::byte* device = nullptr;
  if (mode == "baseline") {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaFree(nullptr), "context");
    lap("context");
    check(cudaMalloc(&device, size), "cudaMalloc");
    lap("cudaMalloc");
    through_slots(device, size, [&](std::byte* slot, std::size_t off, std::size_t n) {
      if (::pread(fd, slot, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) std::exit(2);
    });
    lap("pread into pinned slots + upload");
  } else {
    double context_seconds = 0;
    std::thread context([&] {
      const double c = now();
      check(cudaSetDevice(0), "cudaSetDevice");
      check(cudaFree(nullptr), "context");
      check(cudaMalloc(&device, size), "cudaMalloc");
      context_seconds = now() - c;
    });
    void* raw = nullptr;
    const std::size_t huge = std::size_t{2} << 20;
    if (posix_memalign(&raw, huge, (size + huge - 1) / huge * huge) != 0) return 3;
    ::madvise(raw, (size + huge - 1) / huge * huge, MADV_HUGEPAGE);
    auto* host = static_cast<std::byte*>(raw);
    read_all(fd, host, size);
    lap("pread into pageable (beside context)");
    context.join();
    std::printf("  %-34s %7.4f s (on its thread)\n", "context + cudaMalloc", context_seconds);
    lap("wait for the context");
    if (mode == "stage") {
      through_slots(device, size, [&](std::byte* slot, std::size_t off, std::size_t n) { std::memcpy(slot, host + off, n); });
      lap("copy into pinned slots + upload");
    } else if (mode == "register") {
      check(cudaHostRegister(host, size, cudaHostRegisterDefault), "cudaHostRegister");
      lap("cudaHostRegister");
      check(cudaMemcpy(device, host, size, cudaMemcpyHostToDevice), "upload");
      lap("upload (registered)");
      check(cudaHostUnregister(host), "cudaHostUnregister");
      lap("cudaHostUnregister");
    } else if (mode == "pageable") {
      check(cudaMemcpy(device, host, size, cudaMemcpyHostToDevice), "upload");
      lap("upload (pageable)");
    } else {
      return 2;
    }
  }
  std::printf("  %-34s %7.4f s (%.2f GB)\n", "total inside", now() - start, size / 1e9);
  std::fflush(stdout);
  _exit(0);
}
