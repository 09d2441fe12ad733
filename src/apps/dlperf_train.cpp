// dlperf-train: an MPI program. Parse options into a config struct, run on every rank,
// report on rank 0. Exit codes (train/run.h, comm/mpi_main.h; README "Exit codes"):
//   0 complete; 2 bad input (one line, nothing written); 3 a fault (a rank died or hung, a
//   library error; the job is aborted so no rank is left waiting) or the run could not be
//   recorded (results lock not free within --lock-timeout, file system full); 4 stopped
//   early by a signal (recorded as partial, or nothing recorded while waiting for the lock);
//   5 the loss diverged (recorded as failed).
#include <iostream>

#include "comm/mpi_main.h"
#include "core/error.h"
#include "train/cluster.h"
#include "train/options.h"
#include "train/run.h"
#include "train/size_limits.h"

int main(int argc, char** argv) {
  using namespace dlperf;
  // First of all: Slurm's --signal may come within seconds of the start (its timer resolution
  // is up to a minute), and an unhandled SIGUSR1 would kill the rank instead of stopping the
  // run cleanly. run_training() installs them again after MPI_Init.
  install_stop_handlers();
  // Options are checked before MPI starts: bad input never starts a job or creates a file.
  TrainOptions options;
  try {
    if (parse_train_options(argc, argv, options, std::cout) == ParseOutcome::exit_ok) return 0;
    // Host memory bounds the CPU backend's activations (a GPU's is checked per tensor only);
    // --plan-only allocates none of them.
    if (options.backend == BackendKind::cpu && !options.plan_only) check_activation_sizes(options, physical_memory_bytes());
  } catch (const Error& e) {
    std::cerr << "dlperf-train: " << e.what() << '\n';
    return e.kind() == ErrorKind::usage ? kExitUsage : kExitError;
  }
  return run_mpi_program(argc, argv, "dlperf-train", [&](MpiSession& session) {
    const RunSummary s = run_training(session, options, std::cout);
    if (!s.message.empty() && session.world().rank == 0) std::cerr << "dlperf-train: " << s.message << '\n' << std::flush;
    return exit_code(s.outcome);
  });
}
