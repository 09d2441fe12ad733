// NcclCommunicator; the design is explained in nccl_communicator.h.
#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "comm/nccl/check_nccl.h"
#include "comm/nccl_log.h"
#include "core/check.h"
#include "core/check_cuda.h"
#include "core/error.h"

namespace dlperf {

struct NcclCommunicator::State : RequestState {
  CudaEvent began{CudaEvent::timing};     // on the NCCL stream, just before the collective
  CudaEvent finished{CudaEvent::timing};  // on the NCCL stream after the collective
};

namespace {

class DeviceCommBuffer final : public CommBuffer {
 public:
  explicit DeviceCommBuffer(size_t bytes) : buf_(bytes) {}  // cudaMalloc: 256-byte aligned
  void* bytes() override { return buf_.get(); }
  size_t size_bytes() const override { return buf_.count(); }
  // Synchronous copies on the legacy default stream. From pageable memory cudaMemcpy may return
  // before its DMA lands, and NCCL's stream is not ordered after the legacy one: the upload
  // waits for it, so a collective started next reads the bytes.
  void upload_bytes(std::span<const std::byte> host) override {
    DLPERF_ASSERT(host.size() == buf_.count(), "upload size mismatch");
    DLPERF_CHECK(cudaMemcpy(buf_.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    DLPERF_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void download_bytes(std::span<std::byte> host) override {
    DLPERF_ASSERT(host.size() == buf_.count(), "download size mismatch");
    DLPERF_CHECK(cudaMemcpy(host.data(), buf_.get(), host.size(), cudaMemcpyDeviceToHost));
  }

 private:
  DeviceBuffer<std::byte> buf_;  // (bytes)
};

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::int8: return ncclInt8;
    case DataType::uint8: return ncclUint8;
    case DataType::int32: return ncclInt32;
    case DataType::uint32: return ncclUint32;
    case DataType::int64: return ncclInt64;
    case DataType::uint64: return ncclUint64;
    case DataType::float16: return ncclFloat16;
    case DataType::bfloat16: return ncclBfloat16;
    case DataType::float32: return ncclFloat32;
    case DataType::float64: return ncclFloat64;
  }
  return ncclFloat32;
}

}  // namespace

int select_device_by_local_rank(const WorldInfo& world, MPI_Comm comm) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw_usage_error("--backend nccl: no CUDA device on " + world.this_host);
  const int device = world.local_rank % n;
  DLPERF_CHECK(cudaSetDevice(device));
  // NCCL refuses two ranks on one GPU at its set-up ("Duplicate GPU detected"): said here, with why.
  char bus[32] = {};
  DLPERF_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  if (const std::string shared = shared_gpu(comm, world, bus, n); !shared.empty()) throw_usage_error(shared);
  return device;
}

NcclCommunicator::NcclCommunicator(MPI_Comm parent, const WorldInfo& world, cudaStream_t compute_stream, CommOptions options)
    : rank_(world.rank),
      size_(world.size),
      options_(options),
      compute_(compute_stream),
      heartbeat_(parent, world.hosts, options.heartbeat_period) {
  log_path_ = prepare_nccl_log(world.this_host);  // before this process's first NCCL call
  ncclUniqueId id{};
  if (rank_ == 0) DLPERF_CHECK(ncclGetUniqueId(&id));
  DLPERF_CHECK_MPI(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, parent));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // creation returns at once; settle() bounds the wait for the peers
  heartbeat_.note_started(1);
  settle(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "communicator creation", 1);
  heartbeat_.note_completed(1);
}

NcclCommunicator::~NcclCommunicator() {
  discard_nccl_log();
  if (!comm_) return;
  if (aborted_) return;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding from a fault: a collective may be stuck waiting for a dead peer.
    heartbeat_.fast_shutdown();
    ncclCommAbort(comm_);
    return;
  }
  cudaStreamSynchronize(stream_.get());
  // Non-blocking teardown: finalize until quiescent (bounded), then destroy; abort otherwise.
  ncclResult_t state = ncclCommFinalize(comm_);
  const auto deadline = CommClock::now() + options_.timeout;
  while (state == ncclInProgress && CommClock::now() < deadline) {
    std::this_thread::yield();
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
  }
  if (state == ncclSuccess) ncclCommDestroy(comm_);
  else ncclCommAbort(comm_);
}

void NcclCommunicator::abort_in_flight() {
  if (!comm_ || aborted_) return;
  heartbeat_.fast_shutdown();
  ncclCommAbort(comm_);
  aborted_ = true;
}

void NcclCommunicator::settle(ncclResult_t r, const char* what, uint64_t seq) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw Error(ErrorKind::fault, std::string("NCCL ") + what + " failed: " + ncclGetErrorString(r) + " (" +
                                      (comm_ ? ncclGetLastError(comm_) : "") + ") (" + error_identity() + ")");
  if (r == ncclSuccess) return;
  const auto deadline = CommClock::now() + options_.timeout;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    DLPERF_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress || CommClock::now() > deadline) {
      const std::string why = state != ncclInProgress
                                  ? std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comm_) + ")"
                                  : "not done after " + std::to_string(options_.timeout.count() / 1000) + " s (--timeout)";
      if (!aborted_) {
        ncclCommAbort(comm_);
        aborted_ = true;
        heartbeat_.fast_shutdown();
      }
      throw Error(ErrorKind::fault, std::string("NCCL ") + what + ": " + why + "; " + heartbeat_.diagnose(seq) + " (" +
                                        error_identity() + ")");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::string NcclCommunicator::transport() {
  if (transport_.empty()) transport_ = nccl_transport_from_file(log_path_);
  return transport_;
}

std::shared_ptr<NcclCommunicator::State> NcclCommunicator::begin(CommOp op, size_t bytes) {
  if (aborted_) throw Error(ErrorKind::fault, "NCCL communicator was aborted after an earlier fault (" + error_identity() + ")");
  auto s = std::make_shared<State>();
  s->op = op;
  s->seq = next_seq_++;
  s->bytes = bytes;
  s->started = CommClock::now();
  heartbeat_.note_started(s->seq);
  // The collective must see what the compute stream has produced so far.
  DLPERF_CHECK(cudaEventRecord(produced_.get(), compute_));
  DLPERF_CHECK(cudaStreamWaitEvent(stream_.get(), produced_.get(), 0));
  DLPERF_CHECK(cudaEventRecord(s->began.get(), stream_.get()));
  s->device_begin = s->began.get();
  s->device_end = s->finished.get();
  return s;
}

void NcclCommunicator::end(State& s) { DLPERF_CHECK(cudaEventRecord(s.finished.get(), stream_.get())); }

CommRequest NcclCommunicator::allreduce_start(const void* send, void* recv, size_t count, DataType type) {
  auto s = begin(CommOp::allreduce_sum, count * size_of(type));
  settle(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, stream_.get()), "allreduce", s->seq);
  end(*s);
  return CommRequest(s);
}

// Equal blocks: ncclReduceScatter / ncclAllGather. Unequal ones (a bucket that does not divide
// by the ranks): one grouped ncclReduce / ncclBroadcast per block, rooted at its rank, which
// NCCL runs as one operation.
CommRequest NcclCommunicator::reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) {
  DLPERF_ASSERT(counts.size() == static_cast<size_t>(size_), "one block per rank");
  size_t total = 0;
  for (size_t n : counts) total += n;
  auto s = begin(CommOp::reduce_scatter_sum, total * sizeof(float));
  if (std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; })) {
    settle(ncclReduceScatter(send, recv, counts[0], ncclFloat, ncclSum, comm_, stream_.get()), "reduce-scatter", s->seq);
  } else {
    DLPERF_CHECK(ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < size_; ++r) {
      const size_t n = counts[static_cast<size_t>(r)];
      DLPERF_CHECK(ncclReduce(send + off, recv, n, ncclFloat, ncclSum, r, comm_, stream_.get()));
      off += n;
    }
    settle(ncclGroupEnd(), "reduce-scatter", s->seq);
  }
  end(*s);
  return CommRequest(s);
}

CommRequest NcclCommunicator::all_gather_start(const float* send, float* recv, std::span<const size_t> counts) {
  DLPERF_ASSERT(counts.size() == static_cast<size_t>(size_), "one block per rank");
  size_t total = 0;
  for (size_t n : counts) total += n;
  auto s = begin(CommOp::all_gather, total * sizeof(float));
  if (std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; })) {
    settle(ncclAllGather(send, recv, counts[0], ncclFloat, comm_, stream_.get()), "all-gather", s->seq);  // in place when send = recv + rank x count
  } else {
    DLPERF_CHECK(ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < size_; ++r) {
      const size_t n = counts[static_cast<size_t>(r)];
      const float* from = r == rank_ ? send : recv + off;  // read on the root only
      DLPERF_CHECK(ncclBroadcast(from, recv + off, n, ncclFloat, r, comm_, stream_.get()));
      off += n;
    }
    settle(ncclGroupEnd(), "all-gather", s->seq);
  }
  end(*s);
  return CommRequest(s);
}

void NcclCommunicator::join(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "join() on an empty request");
  DLPERF_CHECK(cudaStreamWaitEvent(compute_, request.state_as<State>()->finished.get(), 0));
}

void NcclCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size_) throw Error(ErrorKind::internal, "broadcast root " + std::to_string(root) + " out of range");
  auto s = begin(CommOp::broadcast, count * sizeof(float));
  settle(ncclBroadcast(data, data, count, ncclFloat, root, comm_, stream_.get()), "broadcast", s->seq);
  end(*s);
  CommRequest r(s);
  wait(r);
}

void NcclCommunicator::barrier() {
  // NCCL has no barrier; a one-element allreduce completes only when every rank has joined.
  auto s = begin(CommOp::barrier, 0);
  settle(ncclAllReduce(barrier_scratch_.get(), barrier_scratch_.get(), 1, ncclFloat, ncclSum, comm_, stream_.get()), "barrier",
         s->seq);
  end(*s);
  CommRequest r(s);
  wait(r);
}

bool NcclCommunicator::poll(State& s) {
  if (s.done.load(std::memory_order_acquire)) return true;
  const cudaError_t q = cudaEventQuery(s.finished.get());
  if (q == cudaSuccess) {
    s.completed = CommClock::now();
    s.done.store(true, std::memory_order_release);
    heartbeat_.note_completed(s.seq);
    return true;
  }
  if (q != cudaErrorNotReady) fail(s, std::string("CUDA error while waiting: ") + cudaGetErrorString(q));
  ncclResult_t async = ncclSuccess;
  DLPERF_CHECK(ncclCommGetAsyncError(comm_, &async));
  if (async != ncclSuccess && async != ncclInProgress)
    fail(s, std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async) + " (" +
                ncclGetLastError(comm_) + "); " + heartbeat_.diagnose(s.seq));
  return false;
}

bool NcclCommunicator::test(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "test() on an empty request");
  return poll(*request.state_as<State>());
}

void NcclCommunicator::wait(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "wait() on an empty request");
  State& s = *request.state_as<State>();
  const auto deadline = CommClock::now() + options_.timeout;
  while (!poll(s)) {
    if (CommClock::now() > deadline) {
      const double waited = std::chrono::duration<double>(options_.timeout).count();
      fail(s, "not complete after " + std::to_string(static_cast<int>(waited)) + " s (--timeout); " +
                  heartbeat_.diagnose(s.seq));
    }
    std::this_thread::yield();
  }
}

void NcclCommunicator::fail(const RequestState& s, const std::string& why) {
  // Kernels stuck in a collective never finish on their own: abort so the device is released.
  if (!aborted_ && comm_) {
    ncclCommAbort(comm_);
    aborted_ = true;
    heartbeat_.fast_shutdown();
  }
  throw Error(ErrorKind::fault, "NCCL " + describe_request(s) + ": " + why + " (" + error_identity() + ")");
}

std::unique_ptr<CommBuffer> NcclCommunicator::make_byte_buffer(size_t bytes) { return std::make_unique<DeviceCommBuffer>(bytes); }

}  // namespace dlperf
