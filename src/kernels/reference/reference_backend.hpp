// The reference backend: serial and deliberately simple, the oracle every other backend is
// tested against. It ignores masks and bitsets and simply sums every block pair in uint64.
#pragma once

#include <memory>

#include "kernels/backend.hpp"

namespace blockmm::kernels {

std::unique_ptr<Backend> make_reference_backend();

}  // namespace blockmm::kernels
