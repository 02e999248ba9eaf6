// The run: read -> partition -> build -> symbolic -> numeric + write -> commit, on every rank.
// Every phase ends at an agreement point, so that an error on any rank stops every rank with
// the same code and message and leaves no output behind.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "driver/options.hpp"
#include "driver/run_stats.hpp"

namespace blockmm::driver {

// What a finished run still holds (the backend, its operands on the device, the pattern), for a
// caller that ends the process at once: run_product moves them into `kept_until_exit` instead of
// freeing them, since the kernel releases device memory and the CUDA context at exit anyway and
// freeing them first cost G1 about 3 ms (bench/NOTES.md item 23). Null: freed on return.
using KeptUntilExit = std::vector<std::shared_ptr<void>>;

RunStats run_product(const Options& options, const comm::Communicator& comm, KeptUntilExit* kept_until_exit = nullptr);

}  // namespace blockmm::driver
