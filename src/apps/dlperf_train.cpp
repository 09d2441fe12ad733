// dlperf-train: an MPI program. Parse options into a config struct, run on every rank,
// report on rank 0. Exit codes (comm/mpi_main.h): 0 success, 2 bad input (one line, nothing
// written), 3 any other failure (the job is aborted so no rank is left waiting).
#include <iostream>

#include "comm/mpi_main.h"
#include "core/error.h"
#include "train/options.h"
#include "train/run.h"

int main(int argc, char** argv) {
  using namespace dlperf;
  // Options are checked before MPI starts: bad input never starts a job or creates a file.
  TrainOptions options;
  try {
    if (parse_train_options(argc, argv, options, std::cout) == ParseOutcome::exit_ok) return 0;
  } catch (const Error& e) {
    std::cerr << "dlperf-train: " << e.what() << '\n';
    return e.kind() == ErrorKind::usage ? kExitUsage : kExitError;
  }
  return run_mpi_program(argc, argv, "dlperf-train", [&](MpiSession& session) {
    run_training(session, options, std::cout);
    return 0;
  });
}
