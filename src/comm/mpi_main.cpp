// run_mpi_program: see mpi_main.h for the policy.
#include "comm/mpi_main.h"

#include <cstdio>
#include <exception>
#include <memory>
#include <new>

#include "core/error.h"

namespace dlperf {

int run_mpi_program(int& argc, char**& argv, const char* program, const std::function<int(MpiSession&)>& body) {
  std::unique_ptr<MpiSession> session;
  try {
    session = std::make_unique<MpiSession>(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return kExitError;
  }
  // Each lone rank says so and stops before any work or output (exit 2): nothing to wait for.
  if (const std::string why = lone_rank_problem(session->world().size); !why.empty()) {
    std::fprintf(stderr, "%s: %s\n", program, why.c_str());
    return kExitUsage;
  }
  try {
    return body(*session);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage) {
      if (session->world().rank == 0) std::fprintf(stderr, "%s: %s\n", program, e.what());
      return kExitUsage;
    }
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    std::fflush(stderr);
    // A lone rank leaves no one waiting: end with the one line above, not MPI_Abort's banner
    // (issue 27 item 11: a disk that filled mid-run printed 9 lines for one message).
    if (session->world().size == 1) return kExitError;
    session->abort(kExitError);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory (%s): a buffer could not be allocated; use smaller sizes\n", program, error_identity().c_str());
    std::fflush(stderr);
    session->abort(kExitError);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error (%s): %s\n", program, error_identity().c_str(), e.what());
    std::fflush(stderr);
    session->abort(kExitError);
  }
}

}  // namespace dlperf
