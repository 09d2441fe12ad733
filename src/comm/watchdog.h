// Watchdog: no collective outside a watch (issue 28). A rank that dies, is stopped (SIGSTOP)
// or is cut off must end the whole job within --timeout wherever the others happen to be
// waiting for it: in the option agreement, the parameter broadcast, a step, the trace gather,
// the final barrier. Blocking MPI calls cannot be interrupted from inside, so the watch is a
// thread beside them: the caller opens a Scope around each phase; if the phase outlives its
// bound, or (in a collective phase) a peer's heartbeat has been silent for --timeout, the
// watchdog prints one line naming this rank, the phase and the peer at fault, then ends the
// job with MPI_Abort(3) (MPI_THREAD_MULTIPLE: it may be called while the caller is blocked).
// This is the one place besides mpi_main.h that aborts: a thread cannot throw into a caller
// blocked in MPI.
//
// Using it for a new collective (e.g. a ZeRO reduce-scatter outside the communicators):
//   { auto watch = watchdog.collective("zero-gather"); MPI_Allgather(...); }
// or, for a request, watchdog.wait_or_abort(request, "zero-gather"). Every rank must open the
// same collective phases in the same order (their count is the operation number peers'
// heartbeats report). Each phase is also a test fault point (core/test_fault.h) of its name.
// The bounds, what each phase waits for and the slack are listed in README ("Faults").
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/heartbeat.h"
#include "comm/mpi_session.h"

namespace dlperf {

class Watchdog {
 public:
  using ms = std::chrono::milliseconds;
  static constexpr ms kNoBound{0};  // a phase bounded only by its peers' heartbeats

  // Collective over `world` (a heartbeat on a duplicate of it). `timeout` is --timeout;
  // `program` prefixes the line it prints.
  Watchdog(MPI_Comm world, const WorldInfo& w, ms timeout, ms heartbeat_period, std::string program);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // An open phase; closing it (end of scope) restores the enclosing one.
  class [[nodiscard]] Scope {
   public:
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    friend class Watchdog;
    struct Phase {
      std::string name;
      ms bound{0};
      bool collective = false;
      bool armed = false;
      std::chrono::steady_clock::time_point entered{};
      uint64_t seq = 0;
    };
    Scope(Watchdog& w, Phase previous, int exceptions) : w_(w), previous_(std::move(previous)), exceptions_(exceptions) {}
    Watchdog& w_;
    Phase previous_;
    int exceptions_;  // std::uncaught_exceptions() at opening: tells unwinding from a normal close
  };

  // A phase every rank enters, in the same order: ends the job when it lasts longer than
  // `bound` (kNoBound: no limit), or when a peer has been silent for --timeout.
  Scope collective(const char* name, ms bound);
  Scope collective(const char* name) { return collective(name, timeout_); }
  // A phase of this rank alone (rank 0 writing the results): ends the job after `bound`.
  Scope local(const char* name, ms bound);
  // MPI_Wait under collective(phase): the helper for a new non-blocking collective.
  void wait_or_abort(MPI_Request& request, const char* phase);

  ms timeout() const { return timeout_; }
  // The phase an exception escaped from (or the one open now): names it in error messages.
  std::string phase_of_failure() const;

 private:
  using Phase = Scope::Phase;
  Scope open(const char* name, ms bound, bool collective);
  void close(Scope& s);
  void run();
  [[noreturn]] void fire(const Phase& p, const Heartbeat* heartbeat, const std::string& why);

  int rank_ = 0;
  std::string host_;
  std::string program_;
  ms timeout_;
  std::unique_ptr<Heartbeat> heartbeat_;  // null for one rank

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  Phase current_;
  std::string failed_;  // first phase left by an exception
  uint64_t next_seq_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dlperf
