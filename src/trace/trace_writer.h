// Writes training runs into an HDF5 trace file (schema: docs/trace-schema.md). Rank 0 owns
// one TraceWriter per run: the constructor registers the run (status "running") in a new
// or existing file, flush() stores everything measured so far, finish() stores the final
// record with its status. Each call atomically replaces the file under a lock, so concurrent
// jobs appending to one file lose nothing and a killed writer never damages earlier runs.
#pragma once

#include <string>
#include <vector>

#include "trace/run_record.h"
#include "trace/trace_file.h"

namespace dlperf {

class TraceWriter {
 public:
  // Appends a new run group /runs/run_NNNNNN with record.info's attributes, status running.
  // Throws Error(usage) when `path` exists but is not a dlperf trace this build can extend or
  // holds a run that cannot be read (naming it), LockTimeout / LockInterrupted when the lock
  // wait ends early (opt.lock: the registration's wait may be cut short by a stop signal).
  // Later writes wait for the lock as opt.lock says, but are never cancelled: they hold
  // measurements.
  TraceWriter(std::string path, const RunInfo& info, const UpdateOptions& opt = {});

  // Rewrites the run with everything in `record` (all ranks, all iterations so far); the
  // status stays "running", so a job killed after this reads back partial with this data.
  // Cost: one copy of the file, so call it every few minutes, not every iteration. Throws
  // LockInterrupted when the registration's cancel flag (a stop signal) ends its lock wait.
  void flush(const RunRecord& record);

  // Final write: `status` is complete, partial (SIGTERM, time limit) or failed; `reason`
  // says why it is not complete ("" when complete).
  // lock_timeout_seconds >= 0: this write's lock wait where shorter than the writer's own (a run
  // stopped by a signal waits less: Slurm kills it KillWait seconds after SIGTERM).
  void finish(const RunRecord& record, RunStatus status, const std::string& reason = "", double lock_timeout_seconds = -1);

  const std::string& path() const { return path_; }
  const std::string& run_name() const { return run_name_; }  // "run_000007"

 private:
  void write_group(hid_t file, const RunRecord& record, RunStatus status, const std::string& reason);
  std::string path_;
  std::string run_name_;
  UpdateOptions flush_;  // for flush: the registration's lock wait, cancelled as it was (a stop)
  UpdateOptions later_;  // for finish: the lock wait without cancellation
};

// Appends finished runs (each with its own info.status) in one locked update: for tools
// and benchmarks that already hold whole records.
void append_runs(const std::string& path, const std::vector<RunRecord>& runs);

}  // namespace dlperf
