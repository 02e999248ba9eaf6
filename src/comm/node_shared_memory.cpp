#include "comm/node_shared_memory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "comm/mpi_check.hpp"
#include "comm/node_comms.hpp"
#include "core/error.hpp"
#include "core/madvise_advice.hpp"

namespace blockmm::comm {

struct NodeSharedMemory::Node {
  MPI_Comm comm = MPI_COMM_NULL;  // the node's ranks (Communicator's, not freed here)
  int rank = 0;
};

struct NodeSharedBytes::Mapping {
  MPI_Comm node = MPI_COMM_NULL;
  int node_rank = 0;
  void* reserved = nullptr;  // the address range around the mapping (its space_for + 2 MiB, unmapped whole)
};

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Maps `fd` (`bytes` long) at a 2 MiB boundary, inside `reserved` (an address range of `bytes`
// + 2 MiB, unmapped whole later): a PMD can map a huge page only where the address and the file
// offset agree modulo 2 MiB. Null on failure (errno says why); `reserved` is set where the range
// was reserved.
std::byte* map_at_huge_boundary(int fd, std::size_t bytes, void*& reserved) {
  void* range = ::mmap(nullptr, bytes + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) return nullptr;
  reserved = range;
  const std::uintptr_t aligned = (reinterpret_cast<std::uintptr_t>(range) + kHugePage - 1) & ~(kHugePage - 1);
  void* data = ::mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  return data == MAP_FAILED ? nullptr : static_cast<std::byte*>(data);
}

// What the node's first rank tells the others: where to find the memory it created (its pid
// and descriptor) and which file it is (device and inode), or descriptor -1 where it made none.
struct Invitation {
  long long pid = 0;
  long long fd = -1;
  long long device = 0;
  long long inode = 0;
};

bool is_invited_file(const struct stat& st, const Invitation& invitation) {
  return S_ISREG(st.st_mode) && static_cast<long long>(st.st_dev) == invitation.device &&
         static_cast<long long>(st.st_ino) == invitation.inode;
}

// This rank's descriptor of the first rank's memory, or -1. The name is checked with stat (no
// open of whatever it leads to) before it is opened, and the file opened is checked again: in
// another PID namespace the same pid may be another process of this user.
int open_invited(const Invitation& invitation) {
  const std::string path = "/proc/" + std::to_string(invitation.pid) + "/fd/" + std::to_string(invitation.fd);
  struct stat named {};
  if (::stat(path.c_str(), &named) != 0 || !is_invited_file(named, invitation)) return -1;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat opened {};
  if (::fstat(fd, &opened) != 0 || !is_invited_file(opened, invitation)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// blockmm before issue 43 kept the node's shared B in "/dev/shm/blockmm-<pid>-<serial>" for a
// moment, and a SIGKILL in that moment left the file, its whole size held in memory until the
// node reboots. Such files of this user, whose process is gone and which are over a minute old
// (a live process in another PID namespace would not hold one that long), are removed, and said.
void remove_stale_named_memory() {
  DIR* listing = ::opendir("/dev/shm");
  if (listing == nullptr) return;
  const int dir_fd = ::dirfd(listing);
  const std::time_t now = std::time(nullptr);
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const std::string prefix = "blockmm-";
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>-<serial>"
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 10 || dash + 1 == rest.size() ||
        rest.find_first_not_of("0123456789") != dash || rest.find_first_not_of("0123456789", dash + 1) != std::string::npos)
      continue;
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to know
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != ::geteuid() || now - st.st_mtime < 60)
      continue;
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0)
      std::fprintf(stderr,
                   "%s: note: removed /dev/shm/%s (%lld MiB), memory left by an earlier blockmm run (process %ld) "
                   "that no longer exists\n",
                   program_invocation_short_name, name.c_str(), static_cast<long long>(st.st_size >> 20), pid);
  }
  ::closedir(listing);
}

// Stops the node's first rank for a test that kills it here (BLOCKMM_TEST_NODE_MEMORY=pause).
void pause_for_test(std::int64_t bytes) {
  std::fprintf(stderr, "blockmm: test: node-shared memory of %lld bytes allocated; pausing\n",
               static_cast<long long>(bytes));
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

}  // namespace

std::int64_t NodeSharedBytes::space_for(std::int64_t bytes) {
  const auto huge = static_cast<std::int64_t>(kHugePage);
  return (std::max<std::int64_t>(bytes, 1) + huge - 1) / huge * huge;
}

std::unique_ptr<NodeSharedMemory> Communicator::node_shared_memory(bool wanted) const {
  if (!node_comms_) return nullptr;
  const MPI_Comm node = node_comms_->node;
  int node_rank = 0, node_size = 1;
  BLOCKMM_MPI_CHECK(MPI_Comm_rank(node, &node_rank));
  BLOCKMM_MPI_CHECK(MPI_Comm_size(node, &node_size));
  if (node_size < 2) return nullptr;
  const bool refused = node_memory_test_.refuse_on_node_rank == node_rank;
  // The first rank creates the memory (where it wants it: a descriptor costs nothing until the
  // memory is sized) and says where it is; each other rank opens it; then all learn whether
  // every rank of the node holds it.
  Invitation invitation;
  int fd = -1;
  if (node_rank == 0 && wanted) {
    remove_stale_named_memory();
    fd = refused ? -1 : ::memfd_create("blockmm-node-shared", MFD_CLOEXEC);
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0) {
      invitation = {static_cast<long long>(::getpid()), fd, static_cast<long long>(st.st_dev),
                    static_cast<long long>(st.st_ino)};
    } else if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
  BLOCKMM_MPI_CHECK(MPI_Bcast(&invitation, 4, MPI_LONG_LONG, 0, node));
  if (node_rank != 0 && wanted && !refused && invitation.fd >= 0) fd = open_invited(invitation);
  const int mine = fd >= 0 ? 1 : 0;
  int everyone = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&mine, &everyone, 1, MPI_INT, MPI_MIN, node));
  if (everyone == 0) {
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  std::unique_ptr<NodeSharedMemory> memory(new NodeSharedMemory());
  memory->node_ = std::make_unique<NodeSharedMemory::Node>();
  memory->node_->comm = node;
  memory->node_->rank = node_rank;
  memory->fd_ = fd;
  memory->test_ = node_memory_test_;
  return memory;
}

NodeSharedMemory::~NodeSharedMemory() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<NodeSharedBytes> NodeSharedMemory::map(std::int64_t bytes) {
  if (fd_ < 0) throw Error(ExitCode::other, "internal error: the node's shared memory is mapped twice");
  std::unique_ptr<NodeSharedBytes> shared(new NodeSharedBytes());
  shared->mapping_ = std::make_unique<NodeSharedBytes::Mapping>();
  NodeSharedBytes::Mapping& m = *shared->mapping_;
  m.node = node_->comm;
  m.node_rank = node_->rank;
  // The first rank sizes the memory and allocates its pages now; the others learn the size (the
  // first rank's counts, as for an MPI window) and whether that failed.
  long long sizing[2] = {std::max<std::int64_t>(bytes, 1), 0};  // bytes, errno of the first rank's failure
  if (m.node_rank == 0) {
    const auto space = static_cast<off_t>(NodeSharedBytes::space_for(sizing[0]));
    int failure = ::ftruncate(fd_, space) == 0 ? 0 : errno;
    if (failure == 0) do failure = ::posix_fallocate(fd_, 0, space); while (failure == EINTR);
    sizing[1] = failure;
    if (failure == 0 && test_.pause_after_allocation) pause_for_test(sizing[0]);
  }
  BLOCKMM_MPI_CHECK(MPI_Bcast(sizing, 2, MPI_LONG_LONG, 0, m.node));
  shared->size_ = sizing[0];
  const auto mapped = static_cast<std::size_t>(NodeSharedBytes::space_for(sizing[0]));
  int failure = static_cast<int>(sizing[1]);
  if (failure == 0) {
    shared->data_ = map_at_huge_boundary(fd_, mapped, m.reserved);
    if (shared->data_ == nullptr) failure = errno != 0 ? errno : ENOMEM;
  }
  ::close(fd_);  // the mappings hold the memory from here on
  fd_ = -1;
  int worst = 0;
  BLOCKMM_MPI_CHECK(MPI_Allreduce(&failure, &worst, 1, MPI_INT, MPI_MAX, m.node));
  if (worst != 0) {
    if (m.reserved != nullptr) ::munmap(m.reserved, mapped + kHugePage);
    m.reserved = nullptr;
    shared->data_ = nullptr;
    throw ResourceError("cannot allocate " + std::to_string((sizing[0] >> 20) + 1) +
                        " MiB of memory for the ranks of a node to share: " + std::strerror(worst));
  }
  // Huge pages where the kernel makes them (best effort): the first rank's collapse puts the
  // memory in 2 MiB pages; the others map them in publish().
  if (m.node_rank == 0) (void)::madvise(shared->data_, mapped, MADV_COLLAPSE);
  return shared;
}

void NodeSharedBytes::publish() const {
  const Mapping& m = *mapping_;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  BLOCKMM_MPI_CHECK(MPI_Barrier(m.node));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (m.node_rank != 0) (void)::madvise(data_, static_cast<std::size_t>(space_for(size_)), MADV_COLLAPSE);
}

NodeSharedBytes::~NodeSharedBytes() {
  const Mapping& m = *mapping_;
  if (m.reserved == nullptr) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) (void)MPI_Barrier(m.node);  // no rank unmaps while another still reads
  ::munmap(m.reserved, static_cast<std::size_t>(space_for(size_)) + kHugePage);
}

}  // namespace blockmm::comm
