// Memory that the ranks of one node share (issues 21 and 43): an anonymous file (memfd_create)
// that the node's first rank creates and every other rank of the node opens through
// /proc/<first rank's pid>/fd/<n>, checking that it got the file the first rank created. It
// never has a name, in /dev/shm or anywhere: no other user can predict, take or block it, a full
// or read-only /dev/shm does not matter, and the kernel frees it with its last descriptor or
// mapping however the ranks end (SIGKILL included). Where any rank of a node cannot reach it (no
// memfd_create, no /proc, ranks in other PID namespaces, a process the kernel does not let its
// siblings inspect), every rank of the node learns so in the same collective and the caller
// keeps a copy a rank instead. Made by Communicator::node_shared_memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace blockmm::comm {

// Bytes that the ranks of one node share: the node's first rank fills them, every rank of the
// node reads them. The mapping starts on a 2 MiB boundary and, where the kernel can
// (MADV_COLLAPSE, Linux 6.1), is backed by huge pages even where shared memory's transparent
// huge pages are off: the kernels' random reads of B cost a TLB miss a 4 KiB page otherwise,
// which one process's private B on huge pages never paid. Made by NodeSharedMemory::map;
// destroying it is collective over the node, like NodeCounters.
class NodeSharedBytes {
 public:
  ~NodeSharedBytes();
  NodeSharedBytes(const NodeSharedBytes&) = delete;
  NodeSharedBytes& operator=(const NodeSharedBytes&) = delete;
  std::byte* data() const { return data_; }
  std::int64_t size() const { return size_; }
  // Collective over the node: what the first rank wrote before it is visible to every rank after.
  void publish() const;
  // The memory that sharing `bytes` takes (whole 2 MiB pages).
  static std::int64_t space_for(std::int64_t bytes);

 private:
  friend class NodeSharedMemory;
  struct Mapping;
  NodeSharedBytes() = default;
  std::unique_ptr<Mapping> mapping_;
  std::byte* data_ = nullptr;
  std::int64_t size_ = 0;
};

// For tests only (CommunicatorOptions::node_memory_test, from BLOCKMM_TEST_NODE_MEMORY): the
// node's rank `refuse_on_node_rank` acts as if it could not open the memory (every rank of the
// node must then keep its own copy); `pause_after_allocation`: the node's first rank, once it has
// allocated the memory in map(), says so on stderr and stops for up to a minute, so that a test
// can kill it at that moment.
struct NodeMemoryTestHook {
  int refuse_on_node_rank = -1;
  bool pause_after_allocation = false;
};

// The node's shared memory before it has a size: every rank of the node holds a descriptor of
// it. Made before the node decides to share anything, so that the decision (and every rank's
// path) can follow whether sharing is possible at all, before any rank reads what it would share.
class NodeSharedMemory {
 public:
  ~NodeSharedMemory();  // closes this rank's descriptor (not collective)
  NodeSharedMemory(const NodeSharedMemory&) = delete;
  NodeSharedMemory& operator=(const NodeSharedMemory&) = delete;

  // Collective over the node, once: `bytes` of the memory (the value on the node's first rank
  // counts), uninitialised and mapped on every rank; the first rank writes them, then every rank
  // calls publish(). The first rank allocates them all here, so that a shortage of memory is a
  // ResourceError (exit 5) on every rank of the node now, not a SIGBUS later. No descriptor is
  // left open: the mappings alone hold the memory.
  std::unique_ptr<NodeSharedBytes> map(std::int64_t bytes);

 private:
  friend class Communicator;
  struct Node;
  NodeSharedMemory() = default;
  std::unique_ptr<Node> node_;
  int fd_ = -1;
  NodeMemoryTestHook test_;
};


}  // namespace blockmm::comm
