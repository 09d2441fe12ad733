// MpiCommunicator: the Communicator for host buffers over MPI (the CPU backend's gradients).
//
// Progress. Open MPI 4.1 has no asynchronous progress of its own ("OMPI progress: no" in
// ompi_info): a non-blocking collective only advances inside MPI calls. The trainer is busy in
// oneDNN kernels during backward, so calls from the caller would have to be sprinkled through
// compute code. Instead each communicator owns a progress thread:
//   * the caller issues MPI_Iallreduce / MPI_Ibcast / MPI_Ibarrier itself (the operation starts
//     at once, in the caller's order, which is the same on every rank) and hands the request
//     over;
//   * the progress thread MPI_Tests every outstanding request. While somebody is blocked in
//     wait() it polls without sleeping (the caller's core is idle anyway); otherwise it sleeps
//     between rounds, backing off up to CommOptions::max_poll_interval, so it takes little CPU
//     from the compute threads. With nothing outstanding it blocks on a condition variable.
//   * it stamps each request's completion time, which is therefore accurate to one poll
//     interval.
// Needs MPI_THREAD_MULTIPLE (MpiSession insists on it).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/heartbeat.h"
#include "comm/mpi_comm_handle.h"
#include "comm/mpi_session.h"

namespace dlperf {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `parent` (usually MPI_COMM_WORLD): works on a private duplicate.
  MpiCommunicator(MPI_Comm parent, const WorldInfo& world, CommOptions options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::mpi; }
  MemorySpace memory_space() const override { return MemorySpace::host; }
  const CommOptions& options() const override { return options_; }

  void broadcast(float* data, size_t count, int root) override;
  bool supports(DataType type) const override;
  CommRequest allreduce_start(const void* send, void* recv, size_t count, DataType type) override;
  CommRequest reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) override;
  CommRequest all_gather_start(const float* send, float* recv, std::span<const size_t> counts) override;
  bool test(CommRequest& request) override;
  void wait(CommRequest& request) override;
  void barrier() override;
  std::unique_ptr<CommBuffer> make_byte_buffer(size_t bytes) override;

 private:
  struct State;
  template <class Issue>
  CommRequest start(CommOp op, size_t bytes, Issue&& issue);
  void progress_loop();
  [[noreturn]] void fail(const RequestState& s, const std::string& why);

  int rank_ = 0;
  int size_ = 1;
  CommOptions options_;
  MpiComm comm_;
  Heartbeat heartbeat_;
  uint64_t next_seq_ = 1;  // caller thread only

  std::mutex mu_;                      // guards active_, waiters_, stop_
  std::condition_variable work_cv_;    // progress thread: new request, a waiter, or stop
  std::condition_variable done_cv_;    // waiters: a request completed
  std::vector<std::shared_ptr<State>> active_;
  int waiters_ = 0;
  bool stop_ = false;
  std::thread progress_;
};

}  // namespace dlperf
