#include "comm/communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <system_error>

#include "comm/launcher.hpp"
#include "comm/mpi_check.hpp"
#include "comm/node_comms.hpp"
#include "core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace blockmm::comm {

CommunicatorOptions communicator_options(const settings::Settings& settings, const LauncherPlacement& placement) {
  CommunicatorOptions c;
  c.mode = settings.mpi == settings::Switch::on    ? MpiMode::on
           : settings.mpi == settings::Switch::off ? MpiMode::off
                                                   : MpiMode::automatic;
  c.placement = placement;
  c.simulate_nodes = settings.simulate_nodes;
  if (settings.mpi_piece_bytes > 0) c.piece_bytes = settings.mpi_piece_bytes;
  if (settings.file_io == settings::FileIo::mpi) c.file_access = FileAccess::mpi_io;
  if (settings.file_io == settings::FileIo::posix || settings.file_io == settings::FileIo::pwrite)
    c.file_access = FileAccess::posix;
  c.node_memory_test.refuse_on_node_rank = settings.test_node_memory_refuse;
  c.node_memory_test.pause_after_allocation = settings.test_node_memory_pause;
  return c;
}

bool mpi_will_start(MpiMode mode, const LauncherPlacement& placement) {
  return mode == MpiMode::on || (mode == MpiMode::automatic && placement.launched);
}

Communicator::Communicator(const CommunicatorOptions& options, int* argc, char*** argv) {
  uses_mpi_ = mpi_will_start(options.mode, options.placement);
  piece_bytes_ = options.piece_bytes >= 8 && options.piece_bytes <= kMpiPieceBytes ? options.piece_bytes : kMpiPieceBytes;
  node_memory_test_ = options.node_memory_test;
  if (!uses_mpi_) return;
  int initialized = 0;
  BLOCKMM_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    // Only the main thread calls MPI (every backend writes from the thread that runs its
    // phases), so the level granted does not matter; SERIALIZED is asked for as before.
    int provided = MPI_THREAD_SINGLE;
    // Open MPI and PMIx keep, until the process ends, much of what they allocate while starting
    // (component tables, strings of components they unload again). LeakSanitizer leaves out what
    // this thread allocates inside MPI_Init, so that no sanitizer run has to match those leaks
    // to suppressions by unwinding every allocation in full.
#if defined(__SANITIZE_ADDRESS__)
    __lsan_disable();
#endif
    const int init_status = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
#if defined(__SANITIZE_ADDRESS__)
    __lsan_enable();
#endif
    BLOCKMM_MPI_CHECK_AS(init_status, ExitCode::other, "MPI_Init_thread");
    finalize_ = true;
  }
  // Return codes instead of aborting, so that every failure becomes a clear message.
  BLOCKMM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  BLOCKMM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  BLOCKMM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  // The ranks sharing this machine: what cores and GPUs are divided among (node_rank, node_size).
  MPI_Comm machine = MPI_COMM_NULL;
  BLOCKMM_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &machine));
  BLOCKMM_MPI_CHECK(MPI_Comm_rank(machine, &node_rank_));
  BLOCKMM_MPI_CHECK(MPI_Comm_size(machine, &node_size_));
  // The node as the distribution sees it: the machine, or this rank alone when simulating (so
  // that the cross-node paths run on one machine while cores are still shared as they are).
  node_comms_ = std::make_unique<NodeComms>();
  simulated_nodes_ = options.simulate_nodes;
  if (simulated_nodes_) {
    BLOCKMM_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank_, 0, &node_comms_->node));
    BLOCKMM_MPI_CHECK(MPI_Comm_free(&machine));
  } else {
    node_comms_->node = machine;
  }
  int placement_rank = 0;
  BLOCKMM_MPI_CHECK(MPI_Comm_rank(node_comms_->node, &placement_rank));
  // The leader is the node's lowest world rank (the split keeps world order); the node's number
  // counts the leaders below it, so nodes are numbered in the order of their lowest rank.
  node_leader_ = rank_;
  BLOCKMM_MPI_CHECK(MPI_Bcast(&node_leader_, 1, MPI_INT, 0, node_comms_->node));
  std::vector<int> leader_of(static_cast<std::size_t>(size_), 0);
  BLOCKMM_MPI_CHECK(MPI_Allgather(&node_leader_, 1, MPI_INT, leader_of.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<int> leaders = leader_of;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  nodes_ = static_cast<int>(leaders.size());
  node_of_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    node_of_[r] = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader_of[r]) - leaders.begin());
  BLOCKMM_MPI_CHECK(
      MPI_Comm_split(MPI_COMM_WORLD, placement_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &node_comms_->leaders));

  const LauncherPlacement& placement = options.placement;
  if (options.file_access == FileAccess::mpi_io && size_ > 1) file_access_ = FileAccess::mpi_io;
  if (options.file_access == FileAccess::automatic && node_size_ < size_) file_access_ = FileAccess::mpi_io;
  if (size_ == 1 && placement.slurm_step_tasks > 1 && placement.open_mpi_size < 0)
    throw UsageError("srun started " + std::to_string(placement.slurm_step_tasks) +
                     " tasks but MPI sees one rank: launch with srun --mpi=pmix (see 'srun --mpi=list') or use mpirun");
}

Communicator::~Communicator() {
  if (node_comms_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // Freed before MPI_Finalize; failures cannot be reported from a destructor and change nothing.
    if (!finalized) {
      if (node_comms_->leaders != MPI_COMM_NULL) (void)MPI_Comm_free(&node_comms_->leaders);
      if (node_comms_->node != MPI_COMM_NULL) (void)MPI_Comm_free(&node_comms_->node);
    }
  }
  if (finalize_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
#if defined(__SANITIZE_ADDRESS__)
      // LeakSanitizer checks now, while Open MPI's memory is still reachable and its components
      // still loaded: after MPI_Finalize, Open MPI 4.1 has unloaded the components whose
      // allocations it never frees, and matching those leaks to the suppressions (by walking
      // their stacks into modules that are gone) is slow, and would be paid at every rank's exit
      // in the sanitizer stage. This is the process's one leak check (the one at exit does not
      // run again); only MPI_Finalize and static destructors come after it.
      __lsan_do_leak_check();
#endif
      MPI_Finalize();
    }
  }
}

void Communicator::barrier() const {
  if (uses_mpi_) BLOCKMM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

std::int64_t Communicator::sum(std::int64_t value) const {
  if (!uses_mpi_) return value;
  std::int64_t out = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

std::int64_t Communicator::max(std::int64_t value) const {
  if (!uses_mpi_) return value;
  std::int64_t out = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

double Communicator::max(double value) const {
  if (!uses_mpi_) return value;
  double out = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

double Communicator::min(double value) const {
  if (!uses_mpi_) return value;
  double out = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
  return out;
}

void Communicator::sum_in_place(std::vector<std::int64_t>& values) const {
  if (!uses_mpi_) return;
  const std::int64_t piece = piece_bytes_ / 8;
  for (std::int64_t first = 0; first < static_cast<std::int64_t>(values.size()); first += piece) {
    const int count = static_cast<int>(std::min<std::int64_t>(piece, static_cast<std::int64_t>(values.size()) - first));
    BLOCKMM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data() + first, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  }
}

std::int64_t Communicator::exclusive_prefix_sum(std::int64_t value) const {
  if (!uses_mpi_) return 0;
  std::int64_t out = 0;
  BLOCKMM_MPI_CHECK(MPI_Exscan(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  return rank_ == 0 ? 0 : out;  // MPI leaves rank 0's result undefined
}

std::vector<std::int64_t> Communicator::gather_all(std::int64_t value) const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(size_), value);
  if (uses_mpi_) BLOCKMM_MPI_CHECK(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, MPI_COMM_WORLD));
  return out;
}

std::vector<double> Communicator::gather_all(double value) const {
  std::vector<double> out(static_cast<std::size_t>(size_), value);
  if (uses_mpi_) BLOCKMM_MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return out;
}

void Communicator::broadcast(std::string& text, int root) const {
  if (!uses_mpi_) return;
  std::int64_t length = static_cast<std::int64_t>(text.size());
  BLOCKMM_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT64_T, root, MPI_COMM_WORLD));
  text.resize(static_cast<std::size_t>(length));
  const std::int64_t piece = piece_bytes_;
  for (std::int64_t first = 0; first < length; first += piece) {
    const int count = static_cast<int>(std::min(piece, length - first));
    BLOCKMM_MPI_CHECK(MPI_Bcast(text.data() + first, count, MPI_CHAR, root, MPI_COMM_WORLD));
  }
}

LargeVector<std::byte> Communicator::exchange(const std::byte* send, const std::vector<std::int64_t>& send_bytes,
                                              std::vector<std::int64_t>& recv_bytes) const {
  recv_bytes.assign(static_cast<std::size_t>(size_), 0);
  if (!uses_mpi_) {
    recv_bytes[0] = send_bytes[0];
    return LargeVector<std::byte>(send, send + send_bytes[0]);
  }
  BLOCKMM_MPI_CHECK(MPI_Alltoall(send_bytes.data(), 1, MPI_INT64_T, recv_bytes.data(), 1, MPI_INT64_T, MPI_COMM_WORLD));
  std::vector<std::int64_t> send_at(static_cast<std::size_t>(size_) + 1, 0), recv_at(static_cast<std::size_t>(size_) + 1, 0);
  for (int r = 0; r < size_; ++r) {
    send_at[r + 1] = send_at[r] + send_bytes[r];
    recv_at[r + 1] = recv_at[r] + recv_bytes[r];
  }
  // Every rank must be able to receive before any rank sends: a rank that cannot allocate its
  // buffer would otherwise leave its peers waiting forever for messages it never takes. So the
  // allocation is agreed on (an out-of-memory rank makes every rank throw the same error).
  LargeVector<std::byte> received;
  std::exception_ptr allocation_failure;
  try {
    received.resize(static_cast<std::size_t>(recv_at[size_]));
  } catch (...) {
    allocation_failure = std::current_exception();
  }
  agree(allocation_failure);

  const std::int64_t piece = piece_bytes_;
  constexpr int kExchangeTag = 7;
  // What stays here is copied; the rest travels point to point in pieces, all posted at once.
  if (send_bytes[rank_] > 0) std::memcpy(received.data() + recv_at[rank_], send + send_at[rank_], send_bytes[rank_]);
  std::vector<MPI_Request> requests;
  int rc = MPI_SUCCESS;
  const char* failed_call = "";
  for (int r = 0; r < size_ && rc == MPI_SUCCESS; ++r) {
    if (r == rank_) continue;
    // One tag for every piece: MPI keeps messages between two ranks on one tag in order.
    for (std::int64_t first = 0; first < recv_bytes[r] && rc == MPI_SUCCESS; first += piece) {
      requests.push_back(MPI_REQUEST_NULL);
      const int count = static_cast<int>(std::min(piece, recv_bytes[r] - first));
      rc = MPI_Irecv(received.data() + recv_at[r] + first, count, MPI_BYTE, r, kExchangeTag, MPI_COMM_WORLD,
                     &requests.back());
      failed_call = "MPI_Irecv";
    }
  }
  for (int step = 1; step < size_ && rc == MPI_SUCCESS; ++step) {
    const int r = (rank_ + step) % size_;  // stagger destinations to spread the load
    for (std::int64_t first = 0; first < send_bytes[r] && rc == MPI_SUCCESS; first += piece) {
      requests.push_back(MPI_REQUEST_NULL);
      const int count = static_cast<int>(std::min(piece, send_bytes[r] - first));
      rc = MPI_Isend(send + send_at[r] + first, count, MPI_BYTE, r, kExchangeTag, MPI_COMM_WORLD, &requests.back());
      failed_call = "MPI_Isend";
    }
  }
  if (rc == MPI_SUCCESS) {
    rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    failed_call = "MPI_Waitall";
  }
  if (rc != MPI_SUCCESS) {
    // Nothing may still write into `received` (or read `send`) once this returns: cancel what
    // is pending and wait for it. The peers may be waiting for messages this rank will never
    // send, so no collective can settle the error: the job ends here, with the reason.
    for (MPI_Request& request : requests)
      if (request != MPI_REQUEST_NULL) (void)MPI_Cancel(&request);
    for (MPI_Request& request : requests)
      if (request != MPI_REQUEST_NULL) (void)MPI_Wait(&request, MPI_STATUS_IGNORE);
    std::fprintf(stderr, "blockmm: error: exchanging blocks between ranks failed: %s: %s\n", failed_call,
                 mpi_error_string(rc).c_str());
    std::fflush(stderr);
    abort(static_cast<int>(ExitCode::other));
  }
  return received;
}

void Communicator::agree(std::exception_ptr local_error) const {
  int code = 0;
  std::string message;
  bool memory = false;  // out of memory: thrown as OutOfMemoryError, which callers tell by its type
  if (local_error) {
    try {
      std::rethrow_exception(local_error);
    } catch (const Error& e) {
      // Alone, the error itself goes on, its type with it (InputError, OutOfMemoryError, ...).
      if (!uses_mpi_) throw;
      code = static_cast<int>(e.code());
      message = e.what();
      memory = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr;
    } catch (const std::bad_alloc&) {
      code = static_cast<int>(ExitCode::resource);
      message = "out of memory";
      memory = true;
    } catch (const std::system_error& e) {
      // A thread that could not be started (EAGAIN) or memory the kernel refused (ENOMEM) is a
      // resource failure like std::bad_alloc.
      const bool resource = e.code() == std::errc::resource_unavailable_try_again ||
                            e.code() == std::errc::not_enough_memory;
      code = static_cast<int>(resource ? ExitCode::resource : ExitCode::other);
      message = resource ? "cannot start a thread or allocate memory: " + std::string(e.what()) : e.what();
      memory = e.code() == std::errc::not_enough_memory;
    } catch (const std::exception& e) {
      code = static_cast<int>(ExitCode::other);
      message = e.what();
    } catch (...) {
      // Not a std::exception: still agreed on, or the other ranks would wait for this one forever.
      code = static_cast<int>(ExitCode::other);
      message = "internal error: an exception of unknown type";
    }
  }
  if (!uses_mpi_) {
    if (!local_error) return;
    if (memory) throw OutOfMemoryError(message);
    throw Error(static_cast<ExitCode>(code), message);
  }
  const int mine = local_error ? rank_ : size_;
  int first_failed = size_;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first_failed == size_) return;
  int agreed[2] = {code, memory ? 1 : 0};
  BLOCKMM_MPI_CHECK(MPI_Bcast(agreed, 2, MPI_INT, first_failed, MPI_COMM_WORLD));
  broadcast(message, first_failed);
  if (agreed[1] != 0) throw OutOfMemoryError(message);
  throw Error(static_cast<ExitCode>(agreed[0]), message);
}

void Communicator::run_phase(const std::function<void()>& phase) const {
  std::exception_ptr error;
  try {
    phase();
  } catch (...) {
    error = std::current_exception();
  }
  agree(error);
}

struct NodeCounters::Window {
  MPI_Win win = MPI_WIN_NULL;
  MPI_Comm node = MPI_COMM_NULL;
  std::vector<std::uint64_t> local;  // without MPI
};

std::unique_ptr<NodeCounters> Communicator::node_counters(int count) const {
  std::unique_ptr<NodeCounters> counters(new NodeCounters());
  counters->window_ = std::make_unique<NodeCounters::Window>();
  counters->count_ = count;
  NodeCounters::Window& w = *counters->window_;
  if (!node_comms_) {
    w.local.assign(static_cast<std::size_t>(std::max(count, 1)), 0);
    counters->counters_ = w.local.data();
    return counters;
  }
  // The node's first rank holds the memory; the others map it (MPI_Win_shared_query). Inside a
  // passive epoch for all (lock_all), as the unified memory model wants for direct loads and stores.
  int node_rank = 0;
  BLOCKMM_MPI_CHECK(MPI_Comm_rank(node_comms_->node, &node_rank));
  const MPI_Aint bytes = node_rank == 0 ? static_cast<MPI_Aint>(std::max(count, 1)) * 8 : 0;
  void* mine = nullptr;
  BLOCKMM_MPI_CHECK(MPI_Win_allocate_shared(bytes, 8, MPI_INFO_NULL, node_comms_->node, &mine, &w.win));
  w.node = node_comms_->node;
  BLOCKMM_MPI_CHECK(MPI_Win_set_errhandler(w.win, MPI_ERRORS_RETURN));
  MPI_Aint size = 0;
  int unit = 0;
  void* base = nullptr;
  BLOCKMM_MPI_CHECK(MPI_Win_shared_query(w.win, 0, &size, &unit, &base));
  counters->counters_ = static_cast<std::uint64_t*>(base);
  BLOCKMM_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, w.win));
  if (node_rank == 0) std::memset(base, 0, static_cast<std::size_t>(size));
  BLOCKMM_MPI_CHECK(MPI_Win_sync(w.win));
  BLOCKMM_MPI_CHECK(MPI_Barrier(node_comms_->node));
  BLOCKMM_MPI_CHECK(MPI_Win_sync(w.win));
  return counters;
}

NodeCounters::~NodeCounters() {
  if (!window_ || window_->win == MPI_WIN_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Failures cannot be reported from a destructor; the barrier keeps a rank from freeing the
  // memory while another still claims from it.
  (void)MPI_Win_unlock_all(window_->win);
  (void)MPI_Barrier(window_->node);
  (void)MPI_Win_free(&window_->win);
}

std::uint64_t NodeCounters::fetch_add(int index, std::uint64_t value) {
  if (index < 0 || index >= count_)
    throw Error(ExitCode::other,
                "internal error: node counter " + std::to_string(index) + " of " + std::to_string(count_));
  return __atomic_fetch_add(counters_ + index, value, __ATOMIC_RELAXED);
}

void Communicator::abort(int exit_code) const {
  if (uses_mpi_) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace blockmm::comm
