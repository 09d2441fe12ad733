// Communicator: the collectives data-parallel training needs (broadcast of rank 0's initial
// parameters, in-place sum-allreduce of gradient buckets, barrier) behind one interface with
// two implementations side by side:
//   MpiCommunicator   (mpi_communicator.h)        host buffers; non-blocking MPI progressed by
//                                                 a dedicated thread while the caller computes
//   NcclCommunicator  (nccl/nccl_communicator.h)  device buffers; NCCL on its own stream,
//                                                 ordered after the compute stream by an event
// Contract shared by both:
//  * One caller thread per communicator; every rank issues the same operations in the same
//    order (as MPI and NCCL require of collectives).
//  * allreduce_sum_start() returns at once; the buffer must not be touched until test() has
//    returned true or wait() has returned.
//  * Every wait is bounded by CommOptions::timeout. On expiry (or a library error) it throws
//    Error(ErrorKind::fault) naming the operation and, from the heartbeat, which rank is
//    behind and why. Only the program's top level decides to MPI_Abort (mpi_main.h).
//  * Each request records when it started and when it was seen complete (steady clock), so
//    the trainer can sum communication time, measure the exposed part, and show overlap.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace dlperf {

enum class CommBackend { mpi, nccl };
enum class MemorySpace { host, device };

const char* to_string(CommBackend b);

struct CommOptions {
  std::chrono::milliseconds timeout{60'000};        // bound on every wait (--timeout)
  std::chrono::milliseconds heartbeat_period{500};  // how often ranks tell each other they are alive
  // MPI progress thread: the longest sleep between two MPI_Test rounds while a request is
  // outstanding and nobody waits. Shorter = lower latency, more CPU taken from compute.
  std::chrono::microseconds max_poll_interval{200};
};

using CommClock = std::chrono::steady_clock;

enum class CommOp { broadcast, allreduce_sum, barrier };
const char* to_string(CommOp op);

// State of one operation, shared between the caller and the machinery completing it.
// Implementations derive from it to keep their handles (MPI requests, CUDA events).
struct RequestState {
  virtual ~RequestState() = default;
  CommOp op = CommOp::allreduce_sum;
  uint64_t seq = 0;   // 1, 2, ... per communicator, identical on every rank for the same op
  size_t bytes = 0;
  CommClock::time_point started{};
  CommClock::time_point completed{};  // valid once done is true
  std::string error;                  // non-empty: the operation failed (valid once done)
  std::atomic<bool> done{false};      // release-stored after completed/error are written
  // Device communicators: timing events (cudaEvent_t) recorded on the communicator's stream
  // just before and after the collective, alive as long as the request. Their times, read
  // through the backend's StepRecorder, are when the collective ran on the GPU. Null on host
  // communicators.
  void* device_begin = nullptr;
  void* device_end = nullptr;
};

// Handle to one outstanding (or finished) operation; cheap to copy.
class CommRequest {
 public:
  CommRequest() = default;
  explicit CommRequest(std::shared_ptr<RequestState> s) : state_(std::move(s)) {}

  bool valid() const { return state_ != nullptr; }
  CommOp op() const { return state_->op; }
  uint64_t seq() const { return state_->seq; }
  size_t bytes() const { return state_->bytes; }
  CommClock::time_point started_at() const { return state_->started; }
  bool completed() const { return state_ && state_->done.load(std::memory_order_acquire); }
  // When completion was observed: by the MPI progress thread (within its poll interval) or,
  // for NCCL, by test()/wait() (an upper bound on when the GPU finished).
  std::optional<CommClock::time_point> completed_at() const {
    if (!completed()) return std::nullopt;
    return state_->completed;
  }
  // completed_at - started_at in seconds; 0 while not complete.
  double seconds() const {
    if (!completed()) return 0.0;
    return std::chrono::duration<double>(state_->completed - state_->started).count();
  }
  std::pair<void*, void*> device_events() const { return {state_->device_begin, state_->device_end}; }
  RequestState* state() const { return state_.get(); }
  template <class T>
  T* state_as() const { return static_cast<T*>(state_.get()); }

 private:
  std::shared_ptr<RequestState> state_;
};

// A float buffer in the communicator's memory space (host for MPI, device for NCCL), with
// copies to and from host memory: lets tests and the benchmark drive both backends alike.
class CommBuffer {
 public:
  virtual ~CommBuffer() = default;
  virtual float* data() = 0;                      // (count) in the communicator's memory space
  virtual size_t count() const = 0;
  virtual void upload(std::span<const float> host) = 0;  // host.size() == count()
  virtual void download(std::span<float> host) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual CommBackend backend() const = 0;
  virtual MemorySpace memory_space() const = 0;

  // Blocking: on return data (count) holds root's values on every rank.
  virtual void broadcast(float* data, size_t count, int root) = 0;
  // Non-blocking, in place: data (count) becomes the element-wise sum over ranks.
  virtual CommRequest allreduce_sum_start(float* data, size_t count) = 0;
  // True once the request has completed; throws Error(fault) if it failed.
  virtual bool test(CommRequest& request) = 0;
  // Blocks until complete; throws Error(fault) on failure or after options().timeout.
  virtual void wait(CommRequest& request) = 0;
  // Orders the compute queue given at construction after the request, waiting on the host
  // only where the memory space requires it: a device communicator makes the compute stream
  // wait for the request's completion event and returns at once (the host checks completion
  // later with wait()/test(), bounded); a host communicator waits here.
  virtual void join(CommRequest& request) { wait(request); }
  // Blocking; bounded like wait().
  virtual void barrier() = 0;

  virtual std::unique_ptr<CommBuffer> make_buffer(size_t count) = 0;
  virtual const CommOptions& options() const = 0;
  // The transport the library chose, as far as it can tell ("P2P, IB" for NCCL; "" unknown).
  virtual std::string transport() { return ""; }
};

// Waits for every request in order (buckets are started in order, so this is the order they
// finish in too).
inline void wait_all(Communicator& comm, std::span<CommRequest> requests) {
  for (CommRequest& r : requests) comm.wait(r);
}

// "allreduce #12 (25.0 MiB, started 61.2 s ago)": how errors name an operation.
std::string describe_request(const RequestState& s);

}  // namespace dlperf
