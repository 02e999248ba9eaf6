// The ranks of a run. Under an MPI launcher this is MPI_COMM_WORLD; started on its own, blockmm
// is one rank and never initialises MPI (a singleton MPI_Init alone can cost more than a small
// product takes). Everything above this header is written once for both cases.
// It also knows the node of every rank (ranks sharing memory, MPI_Comm_split_type shared), so
// that ranks of one node can share the page cache instead of moving input bytes through MPI.
// CommunicatorOptions::simulate_nodes makes every rank its own node for the distribution: the
// cross-node paths then run, and are tested, on one machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/launcher.hpp"
#include "comm/node_shared_memory.hpp"
#include "core/large_buffer.hpp"
#include "settings/settings.hpp"

namespace blockmm::comm {

enum class MpiMode { automatic, on, off };

// How the ranks read and write shared files: POSIX calls where every rank shares one node's view
// of the file system (multi-threaded reads, the output's shared map), MPI-IO where they span
// nodes (it knows the parallel file system's consistency rules).
enum class FileAccess { automatic, posix, mpi_io };

// Largest piece one MPI call moves by default: 1 GiB keeps every int count in range, so
// messages and file accesses beyond 2^31 - 1 bytes go in pieces.
constexpr std::int64_t kMpiPieceBytes = std::int64_t{1} << 30;

struct CommunicatorOptions {
  MpiMode mode = MpiMode::off;
  // Where the launcher placed this process (launcher.hpp): whether `automatic` starts MPI, and
  // what a one-rank job under srun is told.
  LauncherPlacement placement;
  bool simulate_nodes = false;  // every rank its own node, for the distribution
  std::int64_t piece_bytes = kMpiPieceBytes;  // lower in tests, to cross piece boundaries
  FileAccess file_access = FileAccess::automatic;
  NodeMemoryTestHook node_memory_test;  // tests only
};

// The options the settings ask for (BLOCKMM_MPI, BLOCKMM_SIMULATE_NODES, BLOCKMM_MPI_PIECE_BYTES,
// BLOCKMM_IO) for a process the launcher placed at `placement`.
CommunicatorOptions communicator_options(const settings::Settings& settings, const LauncherPlacement& placement);

// Whether a Communicator made with `mode` starts MPI: on, or automatic under a launcher.
bool mpi_will_start(MpiMode mode, const LauncherPlacement& placement);

// Counters in memory that the ranks of one node share (an MPI shared-memory window; ordinary
// memory without MPI), so that ranks can claim work from each other without messages:
// fetch_add is one atomic instruction, safe from any thread of any rank of the node. Made by
// Communicator::node_counters; destroying it is collective over the node (the window is freed),
// so every rank of the node destroys it at the same point of the run.
class NodeCounters {
 public:
  ~NodeCounters();
  NodeCounters(const NodeCounters&) = delete;
  NodeCounters& operator=(const NodeCounters&) = delete;
  // Adds `value` to counter `index` and returns what it held before (they start at 0).
  std::uint64_t fetch_add(int index, std::uint64_t value = 1);

 private:
  friend class Communicator;
  struct Window;
  NodeCounters() = default;
  std::unique_ptr<Window> window_;
  std::uint64_t* counters_ = nullptr;
  int count_ = 0;
};

class Communicator {
 public:
  // Initialises MPI if options.mode says so (automatic: when launched by an MPI launcher).
  explicit Communicator(const CommunicatorOptions& options, int* argc = nullptr, char*** argv = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  bool uses_mpi() const { return uses_mpi_; }
  // Rank among the ranks of this machine, and their count: what cores and GPUs are shared by.
  // Not changed by BLOCKMM_SIMULATE_NODES.
  int node_rank() const { return node_rank_; }
  int node_size() const { return node_size_; }
  // Nodes as the input distribution sees them (ranks of one node read the input from a shared
  // page cache): the machines, or one node per rank under BLOCKMM_SIMULATE_NODES. Numbered 0, 1,
  // ... in the order of their lowest rank.
  int node() const { return node_of_[static_cast<std::size_t>(rank_)]; }
  int nodes() const { return nodes_; }
  int node_of(int rank) const { return node_of_.at(static_cast<std::size_t>(rank)); }
  bool same_node(int rank) const { return node_of(rank) == node(); }
  int node_leader() const { return node_leader_; }  // lowest rank of this node
  bool simulated_nodes() const { return simulated_nodes_; }
  // Largest piece one MPI call moves (CommunicatorOptions::piece_bytes).
  std::int64_t piece_bytes() const { return piece_bytes_; }
  // How this job's ranks access shared files: MPI-IO where asked for or where the ranks span
  // nodes (never for one rank or without MPI), else POSIX.
  FileAccess file_access() const { return file_access_; }

  void barrier() const;
  std::int64_t sum(std::int64_t value) const;
  std::int64_t max(std::int64_t value) const;
  double max(double value) const;
  double min(double value) const;
  void sum_in_place(std::vector<std::int64_t>& values) const;
  std::int64_t exclusive_prefix_sum(std::int64_t value) const;  // 0 on rank 0
  std::vector<std::int64_t> gather_all(std::int64_t value) const;
  std::vector<double> gather_all(double value) const;
  void broadcast(std::string& text, int root) const;

  // Collective over this node's ranks (as the distribution sees nodes): `count` counters at 0,
  // shared by them.
  std::unique_ptr<NodeCounters> node_counters(int count) const;
  // Collective over this node's ranks (as the distribution sees nodes): memory they can share
  // (comm/node_shared_memory.hpp), not yet sized. Null on every rank of the node where any of
  // them passes `wanted` false or cannot reach the memory, where the node has one rank, and
  // without MPI: the same answer on every rank of a node, so that they all take the same path
  // (each keeps a copy of its own otherwise).
  std::unique_ptr<NodeSharedMemory> node_shared_memory(bool wanted) const;

  // Personalised all-to-all of bytes. `send` holds the bytes for rank 0, then rank 1, ...
  // (send_bytes[r] each); the result holds what ranks 0, 1, ... sent here, and recv_bytes
  // their sizes. Any message size (sent in pieces that keep MPI's int counts in range).
  // Collective: a rank that cannot allocate its receive buffer makes every rank throw the same
  // error (agree()) before anything is sent. An MPI call that fails once messages are in flight
  // cannot be agreed on (peers wait for messages that never come): the rank cancels and
  // completes its pending requests, prints the reason and ends the job (abort, exit code 1).
  LargeVector<std::byte> exchange(const std::byte* send, const std::vector<std::int64_t>& send_bytes,
                                  std::vector<std::int64_t>& recv_bytes) const;

  // Phase boundary: every rank passes the error it met (or null). If any rank failed, every
  // rank throws the same blockmm::Error: the code and message of the lowest failing rank, an
  // OutOfMemoryError where that rank ran out of memory (so that callers tell memory from a
  // device's failure by type, never by text). Exceptions that are not blockmm::Error map to exit
  // code 5 (std::bad_alloc, ENOMEM, a thread that cannot start) or 1 (anything else, std::exception
  // or not). Without MPI a blockmm::Error goes on as it was thrown, its type kept.
  void agree(std::exception_ptr local_error) const;

  // Runs `phase` and then agree()s on its outcome.
  void run_phase(const std::function<void()>& phase) const;

  // Ends the whole job at once (after an error that cannot be agreed on).
  [[noreturn]] void abort(int exit_code) const;

 private:
  bool uses_mpi_ = false;
  bool finalize_ = false;
  int rank_ = 0;
  int size_ = 1;
  int node_rank_ = 0;
  int node_size_ = 1;
  int nodes_ = 1;
  int node_leader_ = 0;
  bool simulated_nodes_ = false;
  std::int64_t piece_bytes_ = kMpiPieceBytes;
  FileAccess file_access_ = FileAccess::posix;
  NodeMemoryTestHook node_memory_test_;
  std::vector<int> node_of_{0};  // per rank
  // The node's ranks and the node leaders (MPI communicators, kept for node-level collectives
  // such as a shared window; mpi.h stays out of this header).
  struct NodeComms;
  std::unique_ptr<NodeComms> node_comms_;
};

}  // namespace blockmm::comm
