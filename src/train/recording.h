// Recording a training run in the results file (--output): rank 0's record, the run's
// registration before training, its final write, and the last collective that ends every rank
// with rank 0's outcome. The watchdog bounds of the phases that wait for the file's lock.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_main.h"
#include "comm/watchdog.h"
#include "trace/async_writer.h"
#include "train/cluster/cluster.h"
#include "train/options.h"
#include "train/run.h"
#include "train/trainer.h"

namespace dlperf {

// Rank 0's record of the run, refreshed at each flush, so a failure can still write it.
// The time spent on the training thread for tracing (gathers, handing records to the
// writer thread) is measured, to report what tracing costs.
struct Recorder {
  std::unique_ptr<AsyncTraceWriter> writer;
  RunRecord record;
  double seconds = 0;
  std::vector<std::string> bindings;  // rank 0: every rank's binding (rank_binding.h), by rank

  void collect(MPI_Comm comm, const RankTrace& mine, const WorldInfo& w) {
    const double t0 = steady_seconds();
    auto ranks = gather_traces(comm, mine);
    if (!ranks.empty()) {  // rank 0
      for (size_t r = 0; r < ranks.size(); ++r) {
        ranks[r].host = w.hosts.at(r);
        ranks[r].local_rank = w.local_ranks.at(r);
        if (r < bindings.size()) ranks[r].binding = bindings[r];
      }
      record.ranks = std::move(ranks);
    }
    seconds += steady_seconds() - t0;
  }
  void flush() {
    const double t0 = steady_seconds();
    if (writer) writer->flush(record);
    seconds += steady_seconds() - t0;
  }
};

// Where the run is recorded: rank 0 registers it in the results file before any
// communicator exists, so a wait for the file's lock (another job appending) is no
// collective's timeout; the other ranks wait in a plain broadcast of the outcome, and every
// rank ends the same way when it fails. A stop signal while waiting ends the wait.
struct Registration {
  RunOutcome outcome = RunOutcome::complete;  // complete: registered (or no --output)
  std::string message;
};

Registration register_run(MPI_Comm world, bool root, const TrainOptions& o, Recorder& rec);

// How long rank 0 may take to register or write the run: the lock wait, then the write.
Watchdog::ms results_bound(const TrainOptions& o);
// The final write: it may first wait for a periodic flush that waits for the lock, then for the
// lock itself.
Watchdog::ms final_write_bound(const TrainOptions& o);

// Rank 0's final write of the run: "" once written, else why it could not be (the lock held past
// its wait, a full file system, a flush's failure that finish rethrows). The run is then not
// recorded, and every rank says so by its exit (end_together), none aborted. After a stop signal
// the lock is waited for 20 s at most.
std::string write_final(AsyncTraceWriter& writer, const RunRecord& record, RunStatus status, const std::string& why);

// Every rank leaves together once rank 0 has written the results: the last collective, so a
// peer that stops or dies meanwhile is noticed here (its heartbeat goes silent) rather than
// in MPI_Finalize. Unbounded in time: rank 0's own "write" phase bounds its writing. What
// follows (the communicators' goodbyes, MPI_Finalize) is bounded by --timeout as a whole.
// Returns the run's outcome as rank 0 has it (`mine` on rank 0): a results file rank 0 could
// not write is every rank's exit 3, where the others had seen only a stop (4) or the end (0)
// and the job's code was whichever rank exited first.
RunOutcome end_together(MpiSession& session, Watchdog& watch, RunOutcome mine);

}  // namespace dlperf
