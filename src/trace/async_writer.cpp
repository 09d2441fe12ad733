#include "trace/async_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <exception>
#include <string>

namespace dlperf {

AsyncTraceWriter::AsyncTraceWriter(std::string path, const RunInfo& info, const UpdateOptions& opt)
    : writer_(std::move(path), info, opt), thread_([this] { loop(); }) {}

AsyncTraceWriter::~AsyncTraceWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncTraceWriter::flush(RunRecord record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(record);
  }
  cv_.notify_all();
}

void AsyncTraceWriter::loop() {
  // The file copy must never take a core from training: lowest priority for this thread only
  // (Linux applies nice per thread). Failing to lower it is harmless.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || pending_.has_value(); });
    if (!pending_) return;  // stopping, nothing left
    RunRecord r = std::move(*pending_);
    pending_.reset();
    busy_ = true;
    lock.unlock();
    try {
      writer_.flush(r);
    } catch (const LockInterrupted&) {
      // A stop ended the wait for the lock: no error, the final write stores this and more.
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::current_exception();
      busy_ = false;
      cv_.notify_all();
      continue;
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

std::string AsyncTraceWriter::failure() const {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    e = error_;
  }
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

void AsyncTraceWriter::finish(const RunRecord& record, RunStatus status, const std::string& reason, double lock_timeout_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  pending_.reset();  // the final record supersedes any flush not yet started
  cv_.wait(lock, [this] { return !busy_; });
  if (error_ && status == RunStatus::complete) std::rethrow_exception(error_);
  lock.unlock();
  writer_.finish(record, status, reason, lock_timeout_seconds);
}

}  // namespace dlperf
