// The output writers alone (io::ProductWriter: reserve, copy, fsync, rename), without inputs or
// compute, so that write throughput can be compared between writers, thread counts and file
// systems (bench/NOTES.md). Writes a synthetic product of about BYTES bytes (m = 16 or --m, every
// block-row holding the same number of tiles, records filled outside the timed calls) in chunks
// handed over one at a time, as the numeric phase does.
//
//   write_bench TARGET BYTES [--chunk BYTES] [--format bin|h5] [--threads N] [--parts auto|off|N]
//               [--ahead N] [--rank-threads N] [--m M] [--repeat R]
//
// By default the writer blockmm's policy gives a rank of --rank-threads threads (default 8;
// io::output_policy: mapped on
// tmpfs, huge folios where the kernel makes them, BLOCKMM_HUGE_OUTPUT=0 to keep 4 KiB pages);
// --threads N maps with N copying threads whatever the file system (as BLOCKMM_WRITE_THREADS),
// --threads 0 (or BLOCKMM_IO=pwrite) writes with pwrite; --parts as blockmm's (HDF5 only);
// --ahead N threads prepare the pages ahead (default: the policy's). Under mpiexec each rank
// writes its share of the block-rows. Prints one line per repeat on rank 0: begin, write, finish
// seconds and GB/s over their sum, and how it wrote.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "io/atomic_output.hpp"
#include "io/output_parts.hpp"
#include "io/mapped_writer.hpp"
#include "io/product_writer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::int64_t parse_bytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  switch (*end) {
    case 'K': case 'k': value *= 1024.0; break;
    case 'M': case 'm': value *= 1024.0 * 1024; break;
    case 'G': case 'g': value *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<std::int64_t>(value);
}

int usage() {
  std::fprintf(stderr, "usage: write_bench TARGET BYTES [--chunk BYTES] [--format bin|h5] [--threads N] [--parts auto|off|N] [--ahead N] [--rank-threads N] [--m M] [--repeat R]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace blockmm;
  if (argc < 3) return usage();
  const std::string target = argv[1];
  const std::int64_t bytes = parse_bytes(argv[2]);
  std::int64_t chunk_bytes = std::int64_t{256} << 20;
  std::string format = "bin";
  int threads = -1;  // the policy's
  int ahead = -1;
  int rank_threads = 8;
  int m = 16;
  std::string parts = "off";
  int repeat = 3;
  for (int a = 3; a + 1 < argc; a += 2) {
    const std::string option = argv[a];
    if (option == "--chunk") chunk_bytes = parse_bytes(argv[a + 1]);
    else if (option == "--format") format = argv[a + 1];
    else if (option == "--threads") threads = std::atoi(argv[a + 1]);
    else if (option == "--repeat") repeat = std::atoi(argv[a + 1]);
    else if (option == "--parts") parts = argv[a + 1];
    else if (option == "--ahead") ahead = std::atoi(argv[a + 1]);
    else if (option == "--rank-threads") rank_threads = std::atoi(argv[a + 1]);
    else if (option == "--m") m = std::atoi(argv[a + 1]);
    else return usage();
  }
  if ((argc - 3) % 2 != 0 || bytes <= 0 || chunk_bytes <= 0 || threads < -1 || threads > io::kMaxWriteThreads ||
      repeat < 1 || rank_threads < 1 || m < 1 || m > 64)
    return usage();
  if (threads == 0) ::setenv("BLOCKMM_IO", "pwrite", 1);
  if (threads > 0) ::setenv("BLOCKMM_WRITE_THREADS", std::to_string(threads).c_str(), 1);
  try {
    io::install_cleanup_handlers();
    const settings::Lookup environment = settings::process_environment();
  comm::Communicator comm(
      comm::communicator_options(settings::Settings::read(environment), comm::launcher_placement(environment)), &argc,
      &argv);
    const std::int64_t stride = record_bytes<std::uint32_t>(m);
    const std::int32_t p = 4096;  // block-rows; n = 4096 m
    const std::int64_t per_row = std::max<std::int64_t>(1, std::min<std::int64_t>(p, bytes / stride / p));
    const std::int32_t row_begin = static_cast<std::int32_t>(std::int64_t{p} * comm.rank() / comm.size());
    const std::int32_t row_end = static_cast<std::int32_t>(std::int64_t{p} * (comm.rank() + 1) / comm.size());
    OutputLayout layout;
    layout.row_begin = row_begin;
    layout.row_end = row_end;
    for (std::int32_t r = row_begin; r <= row_end; ++r) layout.row_ptr.push_back((r - row_begin) * per_row);
    const std::int64_t mine = layout.tiles();
    const std::int64_t total = per_row * p;
    const std::int64_t first = per_row * row_begin;
    const std::int64_t chunk_tiles = std::max<std::int64_t>(1, chunk_bytes / stride);
    std::vector<std::byte> buffer(static_cast<std::size_t>(std::min(chunk_tiles, std::max<std::int64_t>(mine, 1)) * stride));
    for (std::size_t b = 0; b < buffer.size(); ++b) buffer[b] = static_cast<std::byte>((b * 2654435761u) >> 13 | 1);
    const io::OutputFormat chosen = format == "h5" ? io::OutputFormat::hdf5 : io::OutputFormat::binary;
    for (int r = 0; r < repeat; ++r) {
      comm.barrier();
      const auto t0 = Clock::now();
      io::OutputPolicy policy = io::output_policy(io::write_policy(threads > 0 ? threads : 0, true, false, false, rank_threads), rank_threads, parts);
      if (ahead >= 0) policy.prepare_ahead_threads = ahead;
      auto writer = io::make_product_writer(chosen, target, comm, policy);
      writer->begin(MatrixShape{p * m, m}, total, first, layout);
      const double begin_s = since(t0);
      double write_s = 0;
      for (std::int64_t t = 0; t < mine; t += chunk_tiles) {
        const std::int64_t count = std::min(chunk_tiles, mine - t);
        for (std::int64_t q = 0; q < count; ++q) {  // the records' (i, j): untimed, as compute is
          const std::int64_t tile = t + q;
          const std::int32_t ij[2] = {static_cast<std::int32_t>(row_begin + tile / per_row),
                                      static_cast<std::int32_t>(tile % per_row)};
          std::memcpy(buffer.data() + q * stride, ij, sizeof ij);
        }
        const auto w = Clock::now();
        writer->write(t, count, buffer.data());
        write_s += since(w);
      }
      const auto f = Clock::now();
      writer->finish();
      const double finish_s = since(f);
      const double all = comm.max(begin_s + write_s + finish_s);
      const double out_bytes = static_cast<double>(comm.sum(writer->bytes_written()));
      const io::OutputReport how = writer->report();
      if (comm.is_root())
        std::printf("write_bench %s %s ranks=%d threads=%d io=%s parts=%d huge=%lld/%lld ahead=%d bytes=%.0f chunk=%lld "
                    "begin=%.3f write=%.3f finish=%.3f total=%.3f GB/s=%.2f (%s)\n",
                    target.c_str(), format.c_str(), comm.size(), how.threads, how.mapped ? "map" : "pwrite", how.parts,
                    static_cast<long long>(how.huge_extents), static_cast<long long>(how.huge_extents + how.small_extents),
                    policy.prepare_ahead_threads, out_bytes, static_cast<long long>(chunk_bytes), begin_s, write_s,
                    finish_s, all, out_bytes / all / 1e9, how.tmpfs_settings.c_str());
    }
    // The output (and its parts) go: a benchmark leaves nothing behind in /dev/shm.
    struct stat st {};
    if (comm.is_root() && ::lstat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {  // never /dev/null
      const std::string dir = target.find('/') == std::string::npos ? "." : target.substr(0, target.rfind('/'));
      for (const std::string& name : io::parts_of_existing_output(target)) ::unlink((dir + "/" + name).c_str());
      ::unlink(target.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
