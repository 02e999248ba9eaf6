// comm::Communicator::agree without MPI (one rank): an error keeps its type on the way through,
// and running out of memory is an OutOfMemoryError whatever threw it, so that callers (the Python
// extension's MemoryError, the kept teams) tell memory from a device's failure by type.
#include <gtest/gtest.h>

#include <new>
#include <system_error>

#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace blockmm::comm {
namespace {

Communicator alone() {
  CommunicatorOptions options;
  options.mode = MpiMode::off;
  return Communicator(options);
}

TEST(Agree, AloneAnErrorKeepsItsType) {
  const Communicator comm = alone();
  EXPECT_THROW(comm.run_phase([] { throw OutOfMemoryError("each GPU must hold a numeric chunk"); }), OutOfMemoryError);
  EXPECT_THROW(comm.run_phase([] { throw InputError("A: truncated"); }), InputError);
  try {
    comm.run_phase([] { throw ResourceError("CUDA: cudaMemcpy: an illegal memory access was encountered"); });
    FAIL() << "no error";
  } catch (const OutOfMemoryError&) {
    FAIL() << "a device's failure became a memory error";
  } catch (const ResourceError& e) {
    EXPECT_EQ(e.code(), ExitCode::resource);
  }
  comm.run_phase([] {});
}

TEST(Agree, RunningOutOfMemoryIsAnOutOfMemoryError) {
  const Communicator comm = alone();
  try {
    comm.run_phase([] { throw std::bad_alloc(); });
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.code(), ExitCode::resource);
    EXPECT_STREQ(e.what(), "out of memory");
  }
  EXPECT_THROW(comm.run_phase([] { throw std::system_error(std::make_error_code(std::errc::not_enough_memory)); }),
               OutOfMemoryError);
  try {
    comm.run_phase([] { throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again)); });
    FAIL() << "no error";
  } catch (const OutOfMemoryError&) {
    FAIL() << "a thread that cannot start became a memory error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::resource);
  }
}

}  // namespace
}  // namespace blockmm::comm
