// The run: read -> partition -> build -> symbolic -> numeric + write -> commit, on every rank.
// Every phase ends at an agreement point, so that an error on any rank stops every rank with
// the same code and message and leaves no output behind.
#pragma once

#include "comm/communicator.hpp"
#include "driver/options.hpp"
#include "driver/run_stats.hpp"

namespace blockmm::driver {

RunStats run_product(const Options& options, const comm::Communicator& comm);

}  // namespace blockmm::driver
