// One run of blockmm on every rank: the inputs' headers, the output's temporary file, the
// threads, the GPUs, the product (multiply/), the commit, and what the run measured. Every
// phase ends at an agreement point, so that an error on any rank stops every rank with the same
// code and message and leaves no output behind.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/choice.hpp"
#include "comm/communicator.hpp"
#include "console/run_stats.hpp"
#include "driver/options.hpp"
#include "kernels/cuda_start.hpp"
#include "multiply/multiply.hpp"

namespace blockmm::driver {

// What a finished run still holds (the backends, their operands on the device, the patterns),
// for a caller that ends the process at once: they are moved here instead of freed, since the
// kernel releases device memory and the CUDA context at exit anyway, and freeing them one by one
// is a measurable part of a short run.
using KeptUntilExit = std::vector<std::shared_ptr<void>>;

// What main began before the run: CUDA's start (its driver load begun before MPI started, where
// the run will probably use a GPU: decided once, from the options and the inputs' sizes), what it
// set in the environment before MPI and CUDA started, and the environment (the launcher's binding).
struct ProcessStart {
  kernels::CudaStart& cuda;
  bool gpu_likely = false;
  std::vector<std::string> settings;
  settings::Lookup environment;
  // Backends made for one product and kept for the next of a batch, by what they were made for;
  // dropped after a product that failed in a way that may have broken them (a GPU's failure).
  backends::KeptTeams teams;
};

console::RunStats run_product(const Options& options, const comm::Communicator& comm, ProcessStart& start,
                     KeptUntilExit* kept_until_exit = nullptr);

// One product from its checks to its stats (on stdout and in --stats-file): its exit code.
// Errors are agreed on by every rank; rank 0 reports them in one line (a batch's product with its
// origin), and no rank returns before it has. A failure that cannot be agreed on (out of memory
// outside an agreement, a thread that cannot start) ends the job.
int run_and_report(const Options& options, const comm::Communicator& comm, ProcessStart& start,
                   KeptUntilExit* kept_until_exit);

}  // namespace blockmm::driver
