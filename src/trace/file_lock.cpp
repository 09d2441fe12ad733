// flock-based exclusive lock (see file_lock.h). flock works across processes on local file
// systems, NFSv4 (emulated with byte-range locks) and Lustre mounted with -o flock.
//
// The wait polls LOCK_NB with a short, growing sleep (10 ms up to 200 ms) instead of
// blocking in flock(LOCK_EX): a blocking flock can only be interrupted by a signal handler
// set up without SA_RESTART, which would leak into the rest of the program; polling keeps
// the timeout and the stop flag in plain code. Writers hold the lock for one file copy, so
// the extra latency is small next to the wait itself.
#include "trace/file_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace dlperf {
namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The holder's record, rewritten in place: readers outside the lock see old or new bytes.
void record_holder(int fd) {
  const std::string line = "host=" + this_host() + " pid=" + std::to_string(::getpid()) + " since=" + utc_now() + "\n";
  if (::ftruncate(fd, 0) != 0) return;  // advisory only: the lock is held regardless
  (void)!::pwrite(fd, line.data(), line.size(), 0);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

}  // namespace

std::string describe_lock_holder(const std::string& lock_path) {
  std::ifstream in(lock_path);
  std::string line;
  std::getline(in, line);
  std::string host, since;
  long pid = 0;
  std::istringstream f(line);
  for (std::string field; f >> field;) {
    if (field.rfind("host=", 0) == 0) host = field.substr(5);
    else if (field.rfind("pid=", 0) == 0) pid = std::strtol(field.c_str() + 4, nullptr, 10);
    else if (field.rfind("since=", 0) == 0) since = field.substr(6);
  }
  if (host.empty() || pid <= 0) return "an unknown process (it recorded no host and pid: not dlperf, e.g. flock(1))";
  // A record left by a dead dlperf process means the holder is someone else.
  if (host == this_host() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
    return "an unknown process (the lock file names pid " + std::to_string(pid) + " on " + host + ", which has exited)";
  return host + " pid " + std::to_string(pid) + (since.empty() ? "" : " (since " + since + ")");
}

FileLock::FileLock(const std::string& lock_path, const LockOptions& opt) {
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0 && errno == ENOENT) {  // the results file's folder, not the lock, is what the user named
    const std::string folder = std::filesystem::path(lock_path).parent_path().string();
    throw_usage_error("the folder " + (folder.empty() ? std::string(".") : folder) + " does not exist (the results file and its lock " +
                      lock_path + " go there): create it first");
  }
  if (fd_ < 0) throw_usage_error("cannot create lock file " + lock_path + ": " + std::strerror(errno));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_report = start;
  auto sleep = std::chrono::milliseconds(10);
  for (;;) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) break;
    const int e = errno;
    if (e != EWOULDBLOCK && e != EINTR) {
      ::close(fd_);
      fd_ = -1;
      throw_usage_error("cannot lock " + lock_path + ": " + std::strerror(e) + " (on Lustre, mount with -o flock)");
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (opt.cancel && opt.cancel->load()) {
      ::close(fd_);
      fd_ = -1;
      throw LockInterrupted("stopped by a signal after waiting " + seconds_text(waited) + " for the lock " + lock_path +
                            " (held by " + describe_lock_holder(lock_path) + "); nothing was written");
    }
    if (waited >= opt.timeout_seconds) {
      ::close(fd_);
      fd_ = -1;
      throw LockTimeout("gave up after " + seconds_text(waited) + " waiting for the lock " + lock_path + ", held by " +
                        describe_lock_holder(lock_path) + " (" + opt.timeout_source + " " + seconds_text(opt.timeout_seconds) +
                        "); nothing was written");
    }
    if (opt.on_wait && Clock::now() >= next_report) {
      const std::string holder = describe_lock_holder(lock_path);
      opt.on_wait(next_report == start ? "waiting for the lock " + lock_path + ", held by " + holder + "; giving up after " +
                                             seconds_text(opt.timeout_seconds) + " (" + opt.timeout_source + ")"
                                       : "still waiting for the lock " + lock_path + " (held by " + holder + "): " +
                                             seconds_text(waited) + " so far, giving up after " +
                                             seconds_text(opt.timeout_seconds));
      next_report += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.report_every_seconds));
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(200));
  }
  record_holder(fd_);
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  (void)!::ftruncate(fd_, 0);  // no stale holder record for the next waiter to misreport
  ::close(fd_);                // closing the descriptor releases the flock
}

}  // namespace dlperf
