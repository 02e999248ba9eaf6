// The input distribution alone, as blockmm runs it up to its numeric phases: open both inputs,
// partition::distribute(), then the backend's build of both operands (reference/cpu backends:
// the host build). Cases whose product would take hours on the machine at hand (D4 on a 2-core
// VM) can so be compared phase by phase (bench/NOTES.md item 11). Under mpirun:
//
//   mpirun -np 2 --bind-to none dist_bench A B [--threads T] [--backend cpu|reference]
//
// Prints one line a rank: "rank R read S exchange S build S (distribution S, A S, B S) total S
// a BLOCKS b BLOCKS" (the phases as --stats counts them: read = opening + the distribution's
// read; build = the distribution's build + the backend's of A and of B), then rank 0 prints the
// slowest rank's phases as "slowest read S exchange S build S total S".
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "kernels/backend.hpp"
#include "partition/distribute.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace blockmm;
  const settings::Lookup environment = settings::process_environment();
  comm::Communicator comm(
      comm::communicator_options(settings::Settings::read(environment), comm::launcher_placement(environment)), &argc,
      &argv);
  std::string a_path, b_path, backend_name = "cpu";
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--backend" && i + 1 < argc) {
      backend_name = argv[++i];
    } else if (a_path.empty()) {
      a_path = arg;
    } else if (b_path.empty()) {
      b_path = arg;
    } else {
      std::fprintf(stderr, "usage: dist_bench A B [--threads T] [--backend cpu|reference]\n");
      return 64;
    }
  }
  if (b_path.empty()) {
    std::fprintf(stderr, "usage: dist_bench A B [--threads T] [--backend cpu|reference]\n");
    return 64;
  }
  if (threads > 0) omp_set_num_threads(threads);
  try {
    comm.barrier();
    const double start = now();
    std::unique_ptr<io::InputFile> a_file, b_file;
    comm.run_phase([&] {
      a_file = io::open_input(a_path, comm);
      b_file = io::open_input(b_path, comm);
    });
    const double opened = now();
    partition::Distribution d = partition::distribute(*a_file, *b_file, comm);
    std::unique_ptr<kernels::Backend> backend = kernels::parse_backend_kind(backend_name) == kernels::BackendKind::reference
                                                    ? kernels::make_reference_backend()
                                                    : kernels::make_cpu_backend({threads});
    const double made = now();
    std::unique_ptr<kernels::Operand> a, b;
    double built_a = 0;
    comm.run_phase([&] {
      a = backend->build(*d.a, d.a_spec);
      d.a.reset();
      built_a = now();
      b = backend->build(*d.b, d.b_spec);
      d.b.reset();
    });
    const double built = now();
    const double read = (opened - start) + d.read_seconds;
    const double exchange = d.exchange_seconds;
    const double build = d.build_seconds + (built - made);
    const double total = built - start;
    std::printf("rank %d read %.3f exchange %.3f build %.3f (distribution %.3f, A %.3f, B %.3f) total %.3f a %lld b %lld\n",
                comm.rank(), read, exchange, build, d.build_seconds, built_a - made, built - built_a, total,
                static_cast<long long>(a->blocks()), static_cast<long long>(b->blocks()));
    std::fflush(stdout);
    const double slowest[4] = {comm.max(read), comm.max(exchange), comm.max(build), comm.max(total)};
    if (comm.rank() == 0)
      std::printf("slowest read %.3f exchange %.3f build %.3f total %.3f\n", slowest[0], slowest[1], slowest[2],
                  slowest[3]);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
