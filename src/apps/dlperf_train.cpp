// dlperf-train: an MPI program. Parse options into a config struct, run on every rank,
// report on rank 0. Exit codes (train/run.h, comm/mpi_main.h; README "Exit codes"):
//   0 complete; 2 bad input (one line, nothing written); 3 a fault (a rank died or hung, a
//   library error; the job is aborted so no rank is left waiting) or the run could not be
//   recorded (results lock not free within --lock-timeout, file system full); 4 stopped
//   early by a signal (recorded as partial, or nothing recorded while waiting for the lock);
//   5 the loss diverged (recorded as failed).
#include <cstdlib>
#include <iostream>
#include <string>

#include "comm/mpi_main.h"
#include "core/error.h"
#include "core/file_io.h"
#include "train/cluster/cluster.h"
#include "train/cluster/rank_binding.h"
#include "train/options.h"
#include "train/run.h"
#include "train/memory/size_limits.h"

namespace {

// Standard output is checked like a file (issue 27 item 11): without --output the printed
// summary is the only record of the run, so a failed write (a full disk, > /dev/full) turns
// a success into exit 3 with one line on stderr. `recorded`: the run also went to a file.
int check_stdout(int code, const std::string& recorded) {
  const std::string why = dlperf::flush_stdout_error();
  if (why.empty() || code != 0) return code;
  std::cerr << "dlperf-train: " << why
            << (recorded.empty() ? " (the summary was the run's only record: rerun with --output FILE)" : " (the run is recorded in " + recorded + ")")
            << '\n';
  return dlperf::kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dlperf;
  // First of all: Slurm's --signal may come within seconds of the start (its timer resolution
  // is up to a minute), and an unhandled SIGUSR1 would kill the rank instead of stopping the
  // run cleanly. run_training() installs them again after MPI_Init.
  install_stop_handlers();
  // Before the default thread count is taken from this thread's CPUs. One line per job: the
  // launchers' rank variables say which process is the first (MPI is not started yet).
  if (const std::string note = restore_launcher_cpus(); !note.empty()) {
    bool first = true;
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
      if (const char* r = std::getenv(v)) first = first && std::string(r) == "0";
    if (first) std::cerr << "dlperf-train: " << note << '\n';
  }
  // Options are checked before MPI starts: bad input never starts a job or creates a file.
  TrainOptions options;
  try {
    if (parse_train_options(argc, argv, options, std::cout) == ParseOutcome::exit_ok) return exit_after_printing("dlperf-train");
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
    return session.world().rank == 0 ? check_stdout(exit_code(s.outcome), options.output) : exit_code(s.outcome);
  });
}
