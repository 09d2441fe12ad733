// StagedCommunicator: a Communicator for device buffers built on a host one (MPI) by staging
// through pinned host memory — --comm mpi on the CUDA backend (issue 13, item 8). It lets ranks
// share a GPU (NCCL refuses two ranks on one device), which is how a multi-rank CUDA run is
// tested on a one-GPU machine, and a CUDA-unaware MPI never sees a device pointer.
//
//  * allreduce_start(s, d, n) returns at once: the copy-out stream waits for the compute
//    stream (an event) and copies d to a pinned buffer kept for (d, n) — gradient buckets are
//    the same slices every step. A staging thread then waits for that copy, runs the MPI
//    allreduce on the pinned buffer (bounded by the MPI communicator's timeout), copies the
//    sum back on the copy-in stream and records `returned`.
//  * join(r) waits on the host until the staging thread has finished r, then makes the compute
//    stream wait for `returned`. That host wait at the end of backward is the price of host
//    staging (--comm nccl has none); the allreduces themselves still overlap backward.
//  * One staging thread runs every operation (broadcast and barrier included) in the order
//    they were issued, so the MPI communicator has one caller thread, as its contract says,
//    and every rank issues its collectives in the same order.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/communicator.h"
#include "comm/nccl/cuda_handles.h"

namespace dlperf {

class StagedCommunicator final : public Communicator {
 public:
  // host: a communicator over host memory (MPI); compute: the stream gradients are made on.
  StagedCommunicator(std::unique_ptr<Communicator> host, cudaStream_t compute);
  ~StagedCommunicator() override;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  CommBackend backend() const override { return host_->backend(); }
  MemorySpace memory_space() const override { return MemorySpace::device; }
  const CommOptions& options() const override { return host_->options(); }

  void broadcast(float* data, size_t count, int root) override;  // data on the device
  // Whatever the host communicator sums (MPI: not half or bfloat16); ZeRO's norms are float64.
  bool supports(DataType type) const override { return host_->supports(type); }
  // send and recv on the device (recv's pinned staging buffer is kept per (recv, bytes)).
  CommRequest allreduce_start(const void* send, void* recv, size_t count, DataType type) override;
  // ZeRO's collectives the same way (send and recv on the device): the whole send range out,
  // the host's reduce-scatter, this rank's block back; or this rank's block out, the host's
  // all-gather in place, every block back.
  CommRequest reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) override;
  CommRequest all_gather_start(const float* send, float* recv, std::span<const size_t> counts) override;
  bool test(CommRequest& request) override;
  void wait(CommRequest& request) override;
  void join(CommRequest& request) override;
  void barrier() override;
  std::unique_ptr<CommBuffer> make_byte_buffer(size_t bytes) override;

 private:
  struct State;
  // The pinned buffer kept for (device, bytes), typed for its caller.
  template <typename T>
  T* staging(const void* device, size_t bytes) {
    return static_cast<T*>(staging_bytes(device, bytes));
  }
  void* staging_bytes(const void* device, size_t bytes);
  // Queues the copy of `copy_bytes` device bytes at `from` to `to` (pinned) on the copy-out
  // stream, after everything the compute stream has queued so far; a request for an operation
  // of `bytes`, whose job `work` runs on the staging thread once that copy is done.
  CommRequest staged(CommOp op, size_t bytes, const void* from, void* to, size_t copy_bytes, std::function<void(State&)> work);
  void post(std::function<void()> job);          // runs on the staging thread, in order
  void run();                                    // the staging thread
  void run_job(const std::shared_ptr<State>& s, const std::function<void()>& work);
  // Blocks until the staging thread has run the request's job (bounded; throws its error): its
  // copy back to the device is queued, not necessarily done.
  void wait_job(CommRequest& request);

  std::unique_ptr<Communicator> host_;
  cudaStream_t compute_;
  int device_ = 0;
  CudaStream out_, in_;  // device -> host, host -> device copies
  CudaEvent produced_;   // on compute_, waited on by out_
  std::map<std::pair<const void*, size_t>, void*> staging_;  // (device, bytes) -> pinned
  uint64_t next_seq_ = 1;

  std::mutex mu_;
  std::condition_variable cv_;       // new job or stop
  std::condition_variable done_cv_;  // a job finished
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dlperf
