// Communicator: the collectives data-parallel training needs (broadcast of rank 0's initial
// parameters, in-place sum-allreduce of gradient buckets, barrier; for the sharded optimizer,
// reduce-scatter of gradient buckets and all-gather of parameters) behind one interface with
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

// Element types of a sum-allreduce. Training reduces float32 gradients; dlperf-comm measures
// any of them (-d), named as nccl-tests names them: int8 uint8 int32 uint32 int64 uint64
// half bfloat16 float double.
enum class DataType { int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64 };
inline constexpr DataType kAllDataTypes[] = {DataType::int8,    DataType::uint8,    DataType::int32,   DataType::uint32,
                                             DataType::int64,   DataType::uint64,   DataType::float16, DataType::bfloat16,
                                             DataType::float32, DataType::float64};
const char* to_string(DataType t);
size_t size_of(DataType t);  // bytes per element
bool parse_data_type(const std::string& name, DataType& out);  // also accepts float32, fp16, bf16, ...

struct CommOptions {
  std::chrono::milliseconds timeout{60'000};        // bound on every wait (--timeout)
  std::chrono::milliseconds heartbeat_period{500};  // how often ranks tell each other they are alive
  // MPI progress thread: the longest sleep between two MPI_Test rounds while a request is
  // outstanding and nobody waits. Shorter = lower latency, more CPU taken from compute.
  std::chrono::microseconds max_poll_interval{200};
};

using CommClock = std::chrono::steady_clock;

enum class CommOp { broadcast, allreduce_sum, barrier, reduce_scatter_sum, all_gather };
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

// A buffer in the communicator's memory space (host for MPI, device for NCCL), with copies to
// and from host memory: lets tests and the benchmark drive both backends alike. Sized in
// bytes; the float views are what training and most tests use.
class CommBuffer {
 public:
  virtual ~CommBuffer() = default;
  virtual void* bytes() = 0;          // (size_bytes) in the communicator's memory space, 16-byte aligned
  virtual size_t size_bytes() const = 0;
  virtual void upload_bytes(std::span<const std::byte> host) = 0;  // host.size() == size_bytes()
  virtual void download_bytes(std::span<std::byte> host) = 0;

  float* data() { return static_cast<float*>(bytes()); }  // (count)
  size_t count() const { return size_bytes() / sizeof(float); }
  void upload(std::span<const float> host) { upload_bytes(std::as_bytes(host)); }
  void download(std::span<float> host) { download_bytes(std::as_writable_bytes(host)); }
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
  // Whether allreduce_start takes this element type (MPI has no half or bfloat16 type).
  virtual bool supports(DataType type) const = 0;
  // Non-blocking: recv (count elements of type) becomes the element-wise sum over ranks of
  // every rank's send (count); send == recv is in place. Neither may be touched until done.
  virtual CommRequest allreduce_start(const void* send, void* recv, size_t count, DataType type) = 0;
  // Non-blocking, in place: data (count) becomes the element-wise sum over ranks.
  CommRequest allreduce_sum_start(float* data, size_t count) { return allreduce_start(data, data, count, DataType::float32); }
  // Non-blocking sum-reduce-scatter (the sharded optimizer, issue 25): send holds sum(counts)
  // floats on every rank, block r being counts[r] floats at offset counts[0] + ... + counts[r-1];
  // recv (counts[rank]) becomes the element-wise sum over ranks of every rank's block `rank`.
  // Counts may differ (a bucket need not divide by the ranks); equal counts are nccl-tests'
  // reduce_scatter. send and recv must not overlap, nor be touched until done.
  virtual CommRequest reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts);
  // Non-blocking all-gather: send holds this rank's block (counts[rank] floats); on completion
  // recv (sum(counts) floats, blocks as above) holds rank r's block at block r on every rank
  // (equal counts: nccl-tests' all_gather). In place when send is recv's block `rank`. Not to be
  // touched until done. The defaults throw Error(usage): a communicator without them (the
  // staged one).
  virtual CommRequest all_gather_start(const float* send, float* recv, std::span<const size_t> counts);
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

  virtual std::unique_ptr<CommBuffer> make_byte_buffer(size_t bytes) = 0;
  std::unique_ptr<CommBuffer> make_buffer(size_t count) { return make_byte_buffer(count * sizeof(float)); }  // (count) floats
  virtual const CommOptions& options() const = 0;
  // The transport the library chose, as far as it can tell ("P2P, IB" for NCCL; "" unknown).
  virtual std::string transport() { return ""; }
  // After a fault, before the device memory its operations use is freed: ends what is in flight
  // (NCCL: the communicator is aborted and its kernels exit), so that freeing memory, which waits
  // for the device, cannot wait for a collective a peer never joins. Unusable afterwards.
  // Host communicators' operations end with the process: nothing to do.
  virtual void abort_in_flight() {}
};

// Waits for every request in order (buckets are started in order, so this is the order they
// finish in too).
inline void wait_all(Communicator& comm, std::span<CommRequest> requests) {
  for (CommRequest& r : requests) comm.wait(r);
}

// Bytes one rank sends in these requests with a ring algorithm (docs/communication.md):
// allreduce of S bytes 2(n-1)/n S; reduce-scatter and all-gather of S bytes over all blocks
// (n-1)/n S; broadcast and barrier not counted. Exact: floor of the rational sum.
int64_t ring_bytes(std::span<const CommRequest> requests, int ranks);

// "allreduce #12 (25.0 MiB, started 61.2 s ago)": how errors name an operation.
std::string describe_request(const RequestState& s);

}  // namespace dlperf
