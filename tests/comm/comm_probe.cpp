// A small MPI program around comm::Communicator for tests/comm/communicator_test.cpp: each
// scenario makes one rank fail in a way the blockmm pipeline cannot be driven into on demand,
// and every rank prints "rank R: exit C: MESSAGE" for the error it ended with.
//
//   comm_probe exchange        every rank sends distinct bytes to every other; checked on arrival
//   comm_probe unknown         rank 1 throws an int (not a std::exception) inside run_phase
//   comm_probe alloc           rank 1 is to receive 2^62 bytes: it cannot allocate them
//   comm_probe isend           MPI_Isend fails on rank 1 (this file's PMPI wrapper) mid-exchange
//   comm_probe nodes           each rank prints what it knows of the nodes (BLOCKMM_SIMULATE_NODES
//                              applies): "rank R: nodes N node X leader L machine S same S0S1..."
//   comm_probe nodes-single    the same without MPI (a plain blockmm run)
//   comm_probe node-memory     the node's shared memory (comm/node_shared_memory.hpp): the first
//                              rank fills 3 MiB + 5 bytes, every rank checks them and that no
//                              descriptor of the memory stays open: "rank R: node memory N bytes"
//                              or "rank R: node memory none"; "node-memory-unwanted": the last
//                              rank does not want it
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace {

bool g_fail_isend = false;

// This process's open descriptors of the node's shared memory (memfd_create's "/memfd:<name>" links).
int open_memfds() {
  int count = 0;
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return -1;
  while (const dirent* entry = ::readdir(fds)) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (::readlink(link.c_str(), target, sizeof target - 1) > 0 && std::strncmp(target, "/memfd:blockmm", 14) == 0) ++count;
  }
  ::closedir(fds);
  return count;
}

}  // namespace

// Replaces MPI_Isend for this program (the profiling interface): the scenario "isend" makes it
// fail on rank 1, as a broken interconnect would, after rank 1 has posted its receives.
extern "C" int MPI_Isend(const void* buffer, int count, MPI_Datatype type, int destination, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (g_fail_isend) return MPI_ERR_OTHER;
  return PMPI_Isend(buffer, count, type, destination, tag, comm, request);
}

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const bool single = scenario == "nodes-single";
  const blockmm::settings::Lookup environment = blockmm::settings::process_environment();
  blockmm::comm::CommunicatorOptions options = blockmm::comm::communicator_options(
      blockmm::settings::Settings::read(environment), blockmm::comm::launcher_placement(environment));
  options.mode = single ? blockmm::comm::MpiMode::off : blockmm::comm::MpiMode::on;
  blockmm::comm::Communicator comm(options, &argc, &argv);
  const int ranks = comm.size();
  const int rank = comm.rank();
  try {
    if (scenario == "exchange") {
      std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks));
      std::vector<std::byte> send;
      for (int r = 0; r < ranks; ++r) {
        send_bytes[r] = 1000 + 10 * r + rank;
        send.insert(send.end(), static_cast<std::size_t>(send_bytes[r]), static_cast<std::byte>(rank * 16 + r));
      }
      std::vector<std::int64_t> recv_bytes;
      blockmm::LargeVector<std::byte> got;
      comm.run_phase([&] { got = comm.exchange(send.data(), send_bytes, recv_bytes); });
      std::size_t at = 0;
      for (int r = 0; r < ranks; ++r) {
        if (recv_bytes[r] != 1000 + 10 * rank + r) throw blockmm::Error(blockmm::ExitCode::other, "wrong size");
        for (std::int64_t b = 0; b < recv_bytes[r]; ++b)
          if (got[at++] != static_cast<std::byte>(r * 16 + rank)) throw blockmm::Error(blockmm::ExitCode::other, "wrong byte");
      }
    } else if (scenario == "nodes" || single) {
      std::string same;
      for (int r = 0; r < ranks; ++r) same += comm.same_node(r) ? '1' : '0';
      std::printf("rank %d: nodes %d node %d leader %d machine %d same %s%s\n", rank, comm.nodes(), comm.node(),
                  comm.node_leader(), comm.node_size(), same.c_str(), comm.simulated_nodes() ? " simulated" : "");
    } else if (scenario == "counters") {
      // Every rank's threads claim values from two node counters at once: between them, the
      // ranks must see each value of each counter exactly once.
      constexpr int kThreads = 4, kClaims = 3000;
      std::unique_ptr<blockmm::comm::NodeCounters> counters = comm.node_counters(2);
      std::vector<std::vector<std::uint64_t>> seen(kThreads);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          for (int c = 0; c < kClaims; ++c) seen[t].push_back(counters->fetch_add(c % 2) * 2 + c % 2);
        });
      for (std::thread& thread : threads) thread.join();
      std::vector<std::uint64_t> mine;
      for (const auto& values : seen) mine.insert(mine.end(), values.begin(), values.end());
      counters.reset();
      std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks), 0);
      send_bytes[0] = static_cast<std::int64_t>(mine.size() * sizeof(std::uint64_t));
      std::vector<std::int64_t> recv_bytes;
      blockmm::LargeVector<std::byte> got;
      comm.run_phase([&] { got = comm.exchange(reinterpret_cast<const std::byte*>(mine.data()), send_bytes, recv_bytes); });
      if (rank == 0) {
        std::vector<std::uint64_t> all(got.size() / sizeof(std::uint64_t));
        std::memcpy(all.data(), got.data(), got.size());
        std::sort(all.begin(), all.end());
        if (all.size() != static_cast<std::size_t>(ranks) * kThreads * kClaims)
          throw blockmm::Error(blockmm::ExitCode::other, "wrong number of claims");
        for (std::size_t v = 0; v < all.size(); ++v)
          if (all[v] != v)
            throw blockmm::Error(blockmm::ExitCode::other, "value " + std::to_string(v) + " claimed twice or never");
      }
    } else if (scenario == "node-memory" || scenario == "node-memory-unwanted") {
      const bool wanted = !(scenario == "node-memory-unwanted" && rank == ranks - 1);
      std::unique_ptr<blockmm::comm::NodeSharedMemory> memory;
      comm.run_phase([&] { memory = comm.node_shared_memory(wanted); });
      if (memory == nullptr) {
        std::printf("rank %d: node memory none\n", rank);
      } else {
        // Only the first rank's size counts.
        const std::int64_t bytes = rank == 0 ? (std::int64_t{3} << 20) + 5 : 1;
        std::unique_ptr<blockmm::comm::NodeSharedBytes> shared;
        comm.run_phase([&] { shared = memory->map(bytes); });
        memory.reset();
        const auto value = [](std::int64_t at) { return static_cast<std::byte>((at * 7 + 3) % 251); };
        if (rank == 0)
          for (std::int64_t at = 0; at < shared->size(); ++at) shared->data()[at] = value(at);
        shared->publish();
        comm.run_phase([&] {
          if (shared->size() != (std::int64_t{3} << 20) + 5) throw blockmm::Error(blockmm::ExitCode::other, "wrong size");
          for (std::int64_t at = 0; at < shared->size(); ++at)
            if (shared->data()[at] != value(at))
              throw blockmm::Error(blockmm::ExitCode::other, "byte " + std::to_string(at) + " differs");
          // The mappings alone hold the memory: no descriptor of it stays open.
          if (open_memfds() != 0) throw blockmm::Error(blockmm::ExitCode::other, "a descriptor of the memory is open");
        });
        std::printf("rank %d: node memory %lld bytes\n", rank, static_cast<long long>(shared->size()));
        shared.reset();  // collective, as every rank of the node reaches it
      }
    } else if (scenario == "unknown") {
      comm.run_phase([&] {
        if (rank == 1) throw 42;
      });
    } else if (scenario == "alloc") {
      std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks), 8);
      if (rank != 1) send_bytes[1] = std::int64_t{1} << 61;  // never read: rank 1 fails first
      const std::vector<std::byte> send(64);
      std::vector<std::int64_t> recv_bytes;
      comm.run_phase([&] { comm.exchange(send.data(), send_bytes, recv_bytes); });
    } else if (scenario == "isend") {
      g_fail_isend = rank == 1;
      std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(ranks), 100);
      const std::vector<std::byte> send(static_cast<std::size_t>(100 * ranks));
      std::vector<std::int64_t> recv_bytes;
      comm.run_phase([&] { comm.exchange(send.data(), send_bytes, recv_bytes); });
    } else {
      std::fprintf(stderr, "comm_probe: unknown scenario '%s'\n", scenario.c_str());
      return 64;
    }
  } catch (const blockmm::Error& e) {
    std::printf("rank %d: exit %d: %s\n", rank, static_cast<int>(e.code()), e.what());
    std::fflush(stdout);
    return static_cast<int>(e.code());
  }
  std::printf("rank %d: exit 0\n", rank);
  std::fflush(stdout);
  return 0;
}
