#include "train/recording.h"

#include <chrono>
#include <iostream>

#include "core/check.h"
#include "core/error.h"
#include "trace/file_lock.h"

namespace dlperf {
namespace {

LockOptions lock_options(const TrainOptions& o, bool cancellable) {
  LockOptions lock;
  lock.timeout_seconds = o.lock_timeout_s;
  if (cancellable) lock.cancel = &stop_requested();
  lock.on_wait = [](const std::string& line) { std::cerr << "dlperf-train: " + line + "\n" << std::flush; };
  return lock;
}

// After a stop signal the final write waits this long at most for the results file's lock
// (--lock-timeout where shorter): Slurm sends SIGKILL KillWait (30 s by default) after SIGTERM,
// and a run killed waiting prints nothing.
constexpr double kStoppedLockWaitSeconds = 20;

}  // namespace

Registration register_run(MPI_Comm world, bool root, const TrainOptions& o, Recorder& rec) {
  // 0 registered, 1 bad input (exit 2), 2 interrupted by a signal, 3 not recorded.
  int code = 0;
  std::string message;
  if (root && !o.output.empty()) {
    UpdateOptions opt;
    opt.lock = lock_options(o, /*cancellable=*/true);
    try {
      rec.writer = std::make_unique<AsyncTraceWriter>(o.output, rec.record.info, opt);
    } catch (const LockInterrupted& e) {
      code = 2;
      message = e.what();
    } catch (const Error& e) {
      code = e.kind() == ErrorKind::usage ? 1 : 3;
      message = e.what();
    }
  }
  DLPERF_CHECK_MPI(MPI_Bcast(&code, 1, MPI_INT, 0, world));
  if (code == 1) throw_usage_error(root ? message : "rank 0 could not register the run (its message says why)");
  if (code == 2) return {RunOutcome::not_started, message};
  if (code == 3) return {RunOutcome::not_recorded, "the run was not started: " + message};
  return {};
}

Watchdog::ms results_bound(const TrainOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(1000 * (o.lock_timeout_s + o.timeout_s)));
}
Watchdog::ms final_write_bound(const TrainOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(1000 * (2 * o.lock_timeout_s + o.timeout_s)));
}
std::string write_final(AsyncTraceWriter& writer, const RunRecord& record, RunStatus status, const std::string& why) {
  // After a stop signal, even one after the last boundary, the lock is waited for briefly.
  const double wait = stop_requested().load() ? kStoppedLockWaitSeconds : -1;
  try {
    writer.finish(record, status, why, wait);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

RunOutcome end_together(MpiSession& session, Watchdog& watch, RunOutcome mine) {
  int outcome = session.world().rank == 0 ? static_cast<int>(mine) : 0;  // the others add nothing to the maximum
  {
    auto phase = watch.collective("barrier", Watchdog::kNoBound);
    DLPERF_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &outcome, 1, MPI_INT, MPI_MAX, session.world_comm()));
  }
  session.bound_exit(watch.timeout(), "dlperf-train");
  return static_cast<RunOutcome>(outcome);
}

}  // namespace dlperf
