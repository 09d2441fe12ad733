// Watchdog thread and phase scopes; see watchdog.h for what it guarantees and why.
#include "comm/watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "comm/job_abort.h"
#include "comm/mpi_main.h"
#include "core/check.h"
#include "core/test_fault.h"

namespace dlperf {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(50);  // part of the stated slack

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Watchdog::Watchdog(MPI_Comm world, const WorldInfo& w, ms timeout, ms heartbeat_period, std::string program)
    : rank_(w.rank), host_(w.this_host), program_(std::move(program)), timeout_(timeout) {
  thread_ = std::thread([this] { run(); });
  // The duplicate for the heartbeat is itself a collective: watched by the thread alone.
  auto setup = local("watchdog-setup", timeout_);
  if (w.size > 1) {
    auto heartbeat = std::make_unique<Heartbeat>(world, w.hosts, heartbeat_period);
    std::lock_guard lock(mu_);
    heartbeat_ = std::move(heartbeat);
  }
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // Unwinding from a fault: peers may be gone, do not wait for their goodbyes.
  if (heartbeat_ && std::uncaught_exceptions() > 0) heartbeat_->fast_shutdown();
}

Watchdog::Scope Watchdog::open(const char* name, ms bound, bool collective) {
  test_fault_point(name);  // test-only: a rank stops or dies exactly here
  std::lock_guard lock(mu_);
  failed_.clear();  // an exception from an earlier phase was handled (a diverged run goes on to gather)
  Phase next{name, bound, collective, true, Clock::now(), collective ? next_seq_++ : current_.seq};
  if (collective && heartbeat_) heartbeat_->note_started(next.seq);
  Phase previous = std::exchange(current_, std::move(next));
  cv_.notify_all();
  return Scope(*this, std::move(previous), std::uncaught_exceptions());
}

Watchdog::Scope Watchdog::collective(const char* name, ms bound) { return open(name, bound, true); }
Watchdog::Scope Watchdog::local(const char* name, ms bound) { return open(name, bound, false); }

Watchdog::Scope::~Scope() { w_.close(*this); }

void Watchdog::close(Scope& s) {
  std::lock_guard lock(mu_);
  if (std::uncaught_exceptions() > s.exceptions_ && failed_.empty()) failed_ = current_.name;
  if (current_.collective && heartbeat_) heartbeat_->note_completed(current_.seq);
  current_ = std::move(s.previous_);
}

void Watchdog::wait_or_abort(MPI_Request& request, const char* phase) {
  auto watch = collective(phase);
  DLPERF_CHECK_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
}

std::string Watchdog::phase_of_failure() const {
  std::lock_guard lock(mu_);
  if (!failed_.empty()) return failed_;
  return current_.name.empty() ? "local-work" : current_.name;
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kPoll);
    if (stop_ || !current_.armed) continue;
    const Phase p = current_;
    Heartbeat* heartbeat = heartbeat_.get();
    const auto elapsed = Clock::now() - p.entered;
    if (p.bound != kNoBound && elapsed > p.bound) {
      lock.unlock();
      char why[96];
      std::snprintf(why, sizeof why, "not finished after %.1f s (its bound)", seconds(elapsed));
      fire(p, heartbeat, why);
    }
    if (p.collective && heartbeat) {
      const auto [silent, peer] = heartbeat->longest_silence();
      if (peer >= 0 && silent > seconds(timeout_)) {
        lock.unlock();
        char why[96];
        std::snprintf(why, sizeof why, "a peer has been silent for %.1f s (--timeout %.0f s)", silent, seconds(timeout_));
        fire(p, heartbeat, why);
      }
    }
  }
}

void Watchdog::fire(const Phase& p, const Heartbeat* heartbeat, const std::string& why) {
  // A local phase waits on nothing of a peer's: the peers' state would mislead (rank 0's "write"
  // waits for the results file's lock or its file system, not a transport).
  const std::string diagnosis = !p.collective ? "a wait of this rank's own (the results file's lock held elsewhere, or its file system stalled)"
                                : heartbeat   ? heartbeat->diagnose(p.seq)
                                              : "no peer to diagnose yet";
  std::fprintf(stderr, "%s: rank %d (%s): phase %s: %s: %s; aborting the job\n", program_.c_str(), rank_, host_.c_str(), p.name.c_str(),
               why.c_str(), diagnosis.c_str());
  std::fflush(stderr);
  abort_job(kExitError);
}

}  // namespace dlperf
