// flock-based exclusive lock (see file_lock.h). flock works across processes on local file
// systems, NFSv4 (emulated with byte-range locks) and Lustre mounted with -o flock.
#include "trace/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dlperf {

FileLock::FileLock(const std::string& lock_path) {
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw_usage_error("cannot create lock file " + lock_path + ": " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;  // a signal (e.g. SIGTERM being handled) must not lose the lock
    int e = errno;
    ::close(fd_);
    throw_usage_error("cannot lock " + lock_path + ": " + std::strerror(e) +
                      " (on Lustre, mount with -o flock)");
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace dlperf
