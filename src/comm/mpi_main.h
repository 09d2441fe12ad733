// The top level of every MPI program (dlperf-comm, dlperf-train, the test drivers): runs the
// body inside an MpiSession and turns a dlperf::Error into the process outcome, so that
// library code only throws and exactly one place decides to end the job:
//   usage error        rank 0 prints one line "program: message"; every rank returns 2
//                      (every rank parsed the same arguments, so all of them stop alike)
//   fault / library /  the rank prints its message to stderr, then MPI_Abort(3): a peer
//   internal error     that is hung or dead would otherwise keep the job alive
// Exit codes: 0 success, 1 the body reported failure (e.g. wrong results), 2 usage, 3 error.
#pragma once

#include <functional>

#include "comm/mpi_session.h"

namespace dlperf {

inline constexpr int kExitUsage = 2;
inline constexpr int kExitError = 3;

int run_mpi_program(int& argc, char**& argv, const char* program, const std::function<int(MpiSession&)>& body);

}  // namespace dlperf
