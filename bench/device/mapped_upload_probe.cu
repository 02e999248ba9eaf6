// Can the inputs reach the device straight from the page cache (bench/NOTES.md item 28, #15)?
// One process, two input files (G1's A and B), one of these ways:
//   baseline: the backend's way today: context, then pread on 16 threads into pinned 4 MiB
//             slots, each slot uploaded on its worker's stream.
//   mapped:   the files mapped read-only and their page tables filled (MADV_POPULATE_READ) on
//             POP threads while the context starts on its own thread; then WORKERS threads take
//             CHUNK_MIB pieces of the mappings, register each (cudaHostRegisterReadOnly) and
//             upload it on their own stream: no copy on the host.
//   parts:    as mapped, but every piece registered first, then every piece uploaded: the two
//             costs apart.
// UNREG=0 leaves the registrations to the exit (time the process from outside), UNREG=1
// unregisters before the exit. OFFSET=12 uploads from 12 bytes into each file (the records after
// the header, the device buffer aligned), OFFSET=0 the whole files.
//   nvcc -O2 -std=c++17 -o mapped_upload_probe mapped_upload_probe.cu -lpthread
//   ./mapped_upload_probe A.bin B.bin baseline|mapped|parts
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_util.cuh"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace {
using probe::check;
using probe::now;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

template <typename F>
void on_threads(int count, F f) {
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t) threads.emplace_back(f, t);
  for (auto& t : threads) t.join();
}

struct Piece {
  const std::byte* host;
  std::size_t device_offset;  // into the one device buffer
  std::size_t bytes;
};

struct Input {
  int fd = -1;
  std::size_t size = 0;
  std::byte* map = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string mode = argv[3];
  const std::size_t chunk = static_cast<std::size_t>(env_int("CHUNK_MIB", 64)) << 20;
  const int workers = env_int("WORKERS", 4);
  const int pop_threads = env_int("POP", 8);
  const bool unregister = env_int("UNREG", 1) != 0;
  const std::size_t offset = static_cast<std::size_t>(env_int("OFFSET", 12));
  Input in[2];
  std::size_t total = 0;
  for (int f = 0; f < 2; ++f) {
    in[f].fd = ::open(argv[1 + f], O_RDONLY);
    struct stat st {};
    if (in[f].fd < 0 || ::fstat(in[f].fd, &st) != 0) return 2;
    in[f].size = static_cast<std::size_t>(st.st_size);
    total += in[f].size - offset;
  }
  const double start = now();
  probe::Laps lap(40);
  std::byte* device = nullptr;
  double context_seconds = 0;
  std::thread context([&] {
    const double c = now();
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaFree(nullptr), "context");
    check(cudaMalloc(&device, total), "cudaMalloc");
    context_seconds = now() - c;
  });

  if (mode == "baseline") {
    context.join();
    lap("context + cudaMalloc");
    constexpr std::size_t kSlot = std::size_t{4} << 20;
    constexpr int kReaders = 16;
    std::vector<void*> slots(kReaders);
    for (auto& s : slots) check(cudaMallocHost(&s, kSlot), "cudaMallocHost");
    lap("pin 16 slots");
    // Pieces over both files in turn.
    std::vector<std::pair<int, std::size_t>> pieces;
    for (int f = 0; f < 2; ++f)
      for (std::size_t off = offset; off < in[f].size; off += kSlot / 2) pieces.push_back({f, off});
    std::atomic<std::size_t> next{0};
    on_threads(kReaders, [&](int w) {
      cudaStream_t stream;
      check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      cudaEvent_t done[2];
      for (auto& e : done) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
      bool used[2] = {false, false};
      int half = 0;
      for (std::size_t p = next++; p < pieces.size(); p = next++) {
        const auto [f, off] = pieces[p];
        const std::size_t n = std::min(kSlot / 2, in[f].size - off);
        if (used[half]) check(cudaEventSynchronize(done[half]), "sync");
        std::byte* buffer = static_cast<std::byte*>(slots[w]) + half * (kSlot / 2);
        if (::pread(in[f].fd, buffer, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) std::exit(3);
        const std::size_t at = (f == 1 ? in[0].size - offset : 0) + (off - offset);
        check(cudaMemcpyAsync(device + at, buffer, n, cudaMemcpyHostToDevice, stream), "upload");
        check(cudaEventRecord(done[half], stream), "record");
        used[half] = true;
        half ^= 1;
      }
      check(cudaStreamSynchronize(stream), "sync");
    });
    lap("pread into pinned slots + upload");
  } else {
    for (int f = 0; f < 2; ++f) {
      void* p = ::mmap(nullptr, in[f].size, PROT_READ, MAP_SHARED, in[f].fd, 0);
      if (p == MAP_FAILED) return 4;
      in[f].map = static_cast<std::byte*>(p);
    }
    // Page-aligned pieces of the mappings.
    std::vector<Piece> pieces;
    for (int f = 0; f < 2; ++f) {
      const std::size_t base = f == 1 ? in[0].size - offset : 0;
      for (std::size_t off = offset; off < in[f].size;) {
        const std::size_t end = std::min(in[f].size, (off / chunk + 1) * chunk);
        pieces.push_back({in[f].map + off, base + (off - offset), end - off});
        off = end;
      }
    }
    if (pop_threads > 0) {
      std::atomic<std::size_t> next{0};
      on_threads(pop_threads, [&](int) {
        for (std::size_t p = next++; p < pieces.size(); p = next++) {
          auto* page = reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(pieces[p].host) & ~std::uintptr_t{4095});
          const std::size_t n = pieces[p].host + pieces[p].bytes - page;
          if (::madvise(page, n, MADV_POPULATE_READ) != 0) std::perror("madvise"), std::exit(5);
        }
      });
      lap("populate page tables (beside context)");
    }
    context.join();
    std::printf("  %-40s %7.4f s (on its thread)\n", "context + cudaMalloc", context_seconds);
    lap("wait for the context");
    int ro = 0;
    check(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, 0), "attribute");
    std::printf("  read-only registration supported: %d\n", ro);
    std::vector<double> register_seconds(workers, 0.0);
    std::atomic<std::size_t> next{0};
    if (mode == "mapped") {
      on_threads(workers, [&](int w) {
        cudaStream_t stream;
        check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
        for (std::size_t p = next++; p < pieces.size(); p = next++) {
          const double r = now();
          check(cudaHostRegister(const_cast<std::byte*>(pieces[p].host), pieces[p].bytes, cudaHostRegisterReadOnly),
                "cudaHostRegister");
          register_seconds[w] += now() - r;
          check(cudaMemcpyAsync(device + pieces[p].device_offset, pieces[p].host, pieces[p].bytes, cudaMemcpyHostToDevice, stream), "upload");
        }
        check(cudaStreamSynchronize(stream), "sync");
      });
      lap("register + upload, pipelined");
    } else {
      on_threads(workers, [&](int w) {
        for (std::size_t p = next++; p < pieces.size(); p = next++) {
          const double r = now();
          check(cudaHostRegister(const_cast<std::byte*>(pieces[p].host), pieces[p].bytes, cudaHostRegisterReadOnly),
                "cudaHostRegister");
          register_seconds[w] += now() - r;
        }
      });
      lap("register every piece");
      cudaStream_t stream;
      check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      for (const Piece& p : pieces)
        check(cudaMemcpyAsync(device + p.device_offset, p.host, p.bytes, cudaMemcpyHostToDevice, stream), "upload");
      check(cudaStreamSynchronize(stream), "sync");
      lap("upload every piece (registered)");
    }
    double sum = 0;
    for (double s : register_seconds) sum += s;
    std::printf("  %-40s %7.4f s over %d workers, %zu pieces of %zu MiB\n", "time inside cudaHostRegister", sum, workers,
                pieces.size(), chunk >> 20);
    if (unregister) {
      for (const Piece& p : pieces) check(cudaHostUnregister(const_cast<std::byte*>(p.host)), "cudaHostUnregister");
      lap("unregister");
    }
  }
  std::printf("  %-40s %7.4f s (%.3f GB)\n", "total inside", now() - start, total / 1e9);
  if (env_int("VERIFY", 0) != 0) {  // every byte back and compared with the files (outside the times)
    std::vector<char> back(total), file(total);
    check(cudaMemcpy(back.data(), device, total, cudaMemcpyDeviceToHost), "copy back");
    std::size_t at = 0;
    for (int f = 0; f < 2; ++f) {
      const std::size_t n = in[f].size - offset;
      if (::pread(in[f].fd, file.data() + at, n, static_cast<off_t>(offset)) != static_cast<ssize_t>(n)) return 6;
      at += n;
    }
    std::printf("  verify: %s\n", back == file ? "device bytes equal the files" : "MISMATCH");
  }
  std::fflush(stdout);
  _exit(0);
}
