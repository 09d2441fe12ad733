// Exclusive advisory lock on "<trace>.lock" (flock), held while one process replaces the
// trace file. The kernel drops it when the holder exits or is SIGKILLed, so a crashed writer
// never leaves the file locked. The lock file is never deleted: deleting it would let two
// processes lock two different inodes of the same name.
#pragma once

#include <string>

namespace dlperf {

class FileLock {
 public:
  explicit FileLock(const std::string& lock_path);  // blocks until the lock is held
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

}  // namespace dlperf
