// Inside src/comm only: the MPI communicators of a rank's node, which comm::Communicator keeps
// for node-level collectives (shared windows, node-shared memory). mpi.h stays out of the public
// headers.
#pragma once

#include <mpi.h>

#include "comm/communicator.hpp"

namespace blockmm::comm {

struct Communicator::NodeComms {
  MPI_Comm node = MPI_COMM_NULL;     // the ranks of this node
  MPI_Comm leaders = MPI_COMM_NULL;  // rank 0 of every node (MPI_COMM_NULL on the others)
};

}  // namespace blockmm::comm
