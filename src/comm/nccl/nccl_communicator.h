// NcclCommunicator: the Communicator for device buffers (the CUDA backend's gradients).
//  * Bootstrap: rank 0 creates the NCCL unique id and broadcasts it over MPI; the communicator
//    uses the current CUDA device (select_device_by_local_rank picks it). The communicator is
//    non-blocking (ncclConfig_t::blocking = 0): creation returns at once and is polled until
//    ready, bounded by CommOptions::timeout, so a peer that never arrives aborts the job with
//    the heartbeat's diagnosis instead of hanging it. Every later call may likewise return
//    ncclInProgress while NCCL enqueues; it is polled to completion (bounded) before the next.
//  * Transport: NCCL's INFO log is captured (comm/nccl_log.h) and transport() names what it
//    chose ("P2P, IB").
//  * Ordering: NCCL runs on the communicator's own stream. Each operation first records an
//    event on the compute stream given at construction and makes the NCCL stream wait on it,
//    so the collective reads the gradients only after the kernels that produced them, without
//    blocking the host or the compute stream.
//  * Completion and faults: each request records a "done" event on the NCCL stream. test() and
//    wait() query it; while waiting, ncclCommGetAsyncError is polled (a peer that died shows
//    up there as a network error). On an async error or after CommOptions::timeout the
//    communicator is aborted (ncclCommAbort, which also unblocks the kernels stuck in the
//    collective) and Error(fault) is thrown with the heartbeat's diagnosis.
//  * Timing: each request records timing events on the NCCL stream just before and after the
//    collective (RequestState::device_begin/end); the trainer reads them through the backend's
//    StepRecorder as the collective's GPU times. started/completed stay host times (issue,
//    and when test()/wait() first saw the end event complete).
//  * join(): the compute stream waits for the request's end event; the host does not wait.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/heartbeat.h"
#include "comm/mpi_session.h"
#include "comm/nccl/cuda_handles.h"

namespace dlperf {

// cudaSetDevice(local_rank % device count); returns the device. Error(usage) with no device.
// Collective over `comm` (shared_gpu): two ranks on one GPU are refused, Error(usage).
int select_device_by_local_rank(const WorldInfo& world, MPI_Comm comm);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `parent`.
  NcclCommunicator(MPI_Comm parent, const WorldInfo& world, cudaStream_t compute_stream, CommOptions options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::nccl; }
  MemorySpace memory_space() const override { return MemorySpace::device; }
  const CommOptions& options() const override { return options_; }

  void broadcast(float* data, size_t count, int root) override;  // data on the device
  bool supports(DataType) const override { return true; }
  CommRequest allreduce_start(const void* send, void* recv, size_t count, DataType type) override;  // device buffers
  CommRequest reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) override;
  CommRequest all_gather_start(const float* send, float* recv, std::span<const size_t> counts) override;
  bool test(CommRequest& request) override;
  void wait(CommRequest& request) override;
  void join(CommRequest& request) override;
  void barrier() override;
  std::unique_ptr<CommBuffer> make_byte_buffer(size_t bytes) override;

  cudaStream_t stream() const { return stream_.get(); }
  // The transports NCCL used so far ("P2P, IB"), from its log; "" when not known.
  std::string transport() override;
  void abort_in_flight() override;

 private:
  struct State;
  std::shared_ptr<State> begin(CommOp op, size_t bytes);
  void end(State& s);
  // Non-blocking NCCL: polls the communicator until `r` (a call's result) has settled, bounded
  // by the timeout; throws Error(fault) naming `what` and the ranks behind.
  void settle(ncclResult_t r, const char* what, uint64_t seq);
  bool poll(State& s);  // true when complete; throws on an async error
  [[noreturn]] void fail(const RequestState& s, const std::string& why);

  int rank_ = 0;
  int size_ = 1;
  CommOptions options_;
  cudaStream_t compute_ = nullptr;
  CudaStream stream_;
  CudaEvent produced_;  // recorded on compute_, waited on by stream_
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  Heartbeat heartbeat_;
  DeviceBuffer<float> barrier_scratch_{1};  // (1) barrier = allreduce of one float
  uint64_t next_seq_ = 2;  // 1 is the communicator's creation
  std::string log_path_;
  std::string transport_;
};

}  // namespace dlperf
