// Checked MPI calls: a failing return code becomes a blockmm::Error naming the call.
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.hpp"

namespace blockmm::comm {

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace blockmm::comm

// Throws Error(code, "<context>: <MPI's message>") when `call` fails.
#define BLOCKMM_MPI_CHECK_AS(call, code, context)                                                       \
  do {                                                                                                 \
    const int blockmm_mpi_rc_ = (call);                                                                 \
    if (blockmm_mpi_rc_ != MPI_SUCCESS)                                                                 \
      throw ::blockmm::Error((code), std::string(context) + ": " + ::blockmm::comm::mpi_error_string(blockmm_mpi_rc_)); \
  } while (0)

#define BLOCKMM_MPI_CHECK(call) BLOCKMM_MPI_CHECK_AS(call, ::blockmm::ExitCode::other, #call)
