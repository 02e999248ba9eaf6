// The reference backend: serial and deliberately simple, the oracle every other backend is
// tested against. It ignores masks and bitsets and simply sums every block pair in uint64.
#pragma once

#include <memory>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

// `whole_inputs`: under MPI on one node, every rank builds both inputs whole and keeps its rows
// (driver/whole_inputs.hpp), the path the cuda backend takes, here testable without a GPU.
std::unique_ptr<Backend> make_reference_backend(bool whole_inputs = false);

}  // namespace blockmm::kernels
