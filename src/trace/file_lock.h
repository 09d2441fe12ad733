// Exclusive advisory lock on "<trace>.lock" (flock), held while one process replaces the
// trace file. The kernel drops it when the holder exits or is SIGKILLed, so a crashed writer
// never leaves the file locked. The lock file is never deleted: deleting it would let two
// processes lock two different inodes of the same name.
//
// Waiting is bounded and visible: the holder writes "host=H pid=P since=T" into the lock
// file (and clears it on release), so a waiter can say who it waits for; the waiter reports
// how long it has waited, gives up after LockOptions::timeout, and stops early when `cancel`
// becomes true (a stop signal), so a held lock never hangs a job.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "core/error.h"

namespace dlperf {

struct LockOptions {
  double timeout_seconds = 300;              // give up after this long (--lock-timeout)
  const std::atomic<bool>* cancel = nullptr; // stop waiting once this is true (e.g. SIGTERM seen)
  std::function<void(const std::string&)> on_wait;  // one line: who holds it, how long waited
  double report_every_seconds = 10;          // how often on_wait hears again while waiting
  std::string timeout_source = "--lock-timeout";  // what set timeout_seconds, for the messages
};

// The wait ended without the lock: timed out, or cancelled (nothing was changed either way).
class LockTimeout : public Error {
 public:
  explicit LockTimeout(const std::string& what) : Error(ErrorKind::fault, what) {}
};
class LockInterrupted : public Error {
 public:
  explicit LockInterrupted(const std::string& what) : Error(ErrorKind::fault, what) {}
};

class FileLock {
 public:
  // Returns with the lock held; throws LockTimeout / LockInterrupted, or Error(usage) when
  // the lock file cannot be created or the file system refuses flock.
  explicit FileLock(const std::string& lock_path, const LockOptions& opt = {});
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

// Who holds `lock_path` as far as its content says: "node7 pid 4242 (since 2026-...)", or
// why that cannot be known. For messages only (read without the lock).
std::string describe_lock_holder(const std::string& lock_path);

}  // namespace dlperf
