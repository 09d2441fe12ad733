// Trace flushes off the critical path. A flush rewrites the whole results file (copy, edit,
// rename: trace_writer.h), which takes up to a second for a large file; done inside the
// timed loop it would be measured as training time. AsyncTraceWriter hands each flush to a
// background thread and returns at once; only the newest pending record is kept (an older
// one is superseded). finish() waits for the thread, then writes the final record.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "trace/trace_writer.h"

namespace dlperf {

class AsyncTraceWriter {
 public:
  // Registers the run (synchronous; TraceWriter's constructor says what it throws).
  AsyncTraceWriter(std::string path, const RunInfo& info, const UpdateOptions& opt = {});
  ~AsyncTraceWriter();
  AsyncTraceWriter(const AsyncTraceWriter&) = delete;
  AsyncTraceWriter& operator=(const AsyncTraceWriter&) = delete;

  void flush(RunRecord record);  // returns at once
  // Waits for pending flushes, then writes the final record; rethrows a background error.
  void finish(const RunRecord& record, RunStatus status, const std::string& reason = "", double lock_timeout_seconds = -1);
  const TraceWriter& writer() const { return writer_; }
  // The first failed background flush's message ("" while every flush succeeded): a run whose
  // trace can no longer be written (a full disk) stops instead of training on unrecorded.
  std::string failure() const;

 private:
  void loop();

  TraceWriter writer_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<RunRecord> pending_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dlperf
