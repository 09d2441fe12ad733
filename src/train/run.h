// One benchmark run of dlperf-train on every rank of an MPI job: from validated options to
// the printed summary and the run appended to the results file.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "comm/mpi_session.h"
#include "trace/run_record.h"
#include "train/options.h"

namespace dlperf {

// How a run ended, the same on every rank (each is decided collectively), and its exit code:
//   complete     0  every iteration measured (and recorded, with --output)
//   partial      4  a stop signal (SIGTERM, SIGINT, SIGUSR1) ended it early: recorded as partial
//   not_started  4  a stop signal came while waiting for the results file's lock: nothing recorded
//   diverged     5  the loss became NaN/Inf or grew past --max-loss-growth: recorded as failed
//   not_recorded 3  the run could not be registered in the results file (--lock-timeout passed,
//                   the file system is full): nothing trained, nothing recorded
// Bad input exits 2 and a fault (a rank died or hung, a library error) 3 (comm/mpi_main.h).
enum class RunOutcome { complete, partial, not_started, diverged, not_recorded };
inline constexpr int kExitStopped = 4;
inline constexpr int kExitDiverged = 5;
int exit_code(RunOutcome outcome);

struct RunSummary {
  RunOutcome outcome = RunOutcome::complete;
  std::string message;       // why the outcome is not complete: one line for rank 0 to print
  double samples_per_s = 0;  // all ranks, over the measured window, timed on the slowest rank
  int64_t measured_iterations = 0;
  int64_t parameter_count = 0;
  int64_t peak_memory_bytes = 0;  // the largest of any rank
  float first_loss = 0, last_loss = 0;
  bool stopped_early = false;     // a stop signal ended the run: it is recorded as partial
  int64_t max_batch = 0;          // --find-max-batch: the largest batch per device that trains
};

// Collective: every rank calls it. out receives progress and the summary on rank 0 only;
// stderr hears about waits for the results file's lock.
RunSummary run_training(MpiSession& session, const TrainOptions& o, std::ostream& out);

// Throughput of a gathered run: samples in the window of every rank / the longest window
// of any rank (DLPerf: the slowest rank sets the pace). 0 when no rank has a window.
double job_throughput(const std::vector<RankTrace>& ranks, int64_t warmup, int64_t batch_per_rank);

}  // namespace dlperf
