// Heartbeat: the watchdog that lets a rank whose wait timed out say *which* peer is behind
// and *why*. Every rank's heartbeat thread sends each peer, every `period`, the sequence
// number of the last operation its communicator started and completed, on a private
// duplicate of the world communicator (so it never matches the collectives' messages).
// When a wait expires, diagnose(seq) classifies every peer:
//   silent   no heartbeat for 4 periods: the process died, was stopped, or its node is gone
//   behind   alive, but has not started operation `seq`: stuck in its own computation
//            (a hang) or took a different code path
//   left     already shut its communicator down
// Under mpirun a dead rank usually ends the whole job first (Open MPI's runtime kills the
// job when a process exits without MPI_Finalize); the heartbeat matters when it does not
// (srun without --kill-on-bad-exit, a hung or stopped rank).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/mpi_comm_handle.h"

namespace dlperf {

class Heartbeat {
 public:
  // Collective over `parent`. hosts[r] names rank r in diagnoses.
  Heartbeat(MPI_Comm parent, std::vector<std::string> hosts, std::chrono::milliseconds period);
  // Says goodbye to every peer and waits (bounded) for theirs, so no message is left
  // unmatched at MPI_Finalize; after fast_shutdown() it just stops its thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void note_started(uint64_t seq) { started_.store(seq, std::memory_order_relaxed); }
  void note_completed(uint64_t seq) { completed_.store(seq, std::memory_order_relaxed); }

  // One line per peer that is not keeping up with operation `seq`.
  std::string diagnose(uint64_t seq) const;
  // How long the longest-silent peer (one that has not said goodbye) has not been heard
  // from, in seconds, and which rank that is (-1 alone): the watchdog's sign of a peer that
  // died, was stopped or was cut off.
  std::pair<double, int> longest_silence() const;
  // World rank q: nullopt when it is not in this heartbeat's communicator (or is this rank);
  // else whether it was heard from in the last two periods and has not said goodbye
  // (comm/job_abort.h: who ends the job).
  std::optional<bool> heard_from_world_rank(int q) const;
  // A fault happened: do not wait for goodbyes (a dead peer would never send one).
  void fast_shutdown() { fast_.store(true); }

 private:
  void run();

  MpiComm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::string> hosts_;
  std::vector<int> world_rank_;  // [size]: each rank's rank in MPI_COMM_WORLD
  std::chrono::milliseconds period_;
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> fast_{false};

  mutable std::mutex mu_;  // guards the peer table below, written by the thread
  std::vector<std::chrono::steady_clock::time_point> last_heard_;  // [size]
  std::vector<uint64_t> peer_started_;                             // [size]
  std::vector<uint64_t> peer_completed_;                           // [size]
  std::vector<char> peer_left_;                                    // [size]
  bool clean_ = true;  // false: requests may still be pending, leak the communicator

  std::thread thread_;
};

}  // namespace dlperf
