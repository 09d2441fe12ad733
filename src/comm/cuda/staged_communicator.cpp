// StagedCommunicator; the design is explained in staged_communicator.h.
#include "comm/cuda/staged_communicator.h"

#include <chrono>

#include "core/check.h"
#include "core/check_cuda.h"
#include "core/error.h"

namespace dlperf {

struct StagedCommunicator::State : RequestState {
  CudaEvent copied;    // on out_: the device data is in the pinned buffer
  CudaEvent returned;  // on in_: the sum is back in device memory
};

namespace {

class StagedDeviceBuffer final : public CommBuffer {
 public:
  explicit StagedDeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) DLPERF_CHECK(cudaMalloc(&p_, bytes_));
  }
  ~StagedDeviceBuffer() override {
    if (p_) cudaFree(p_);
  }
  StagedDeviceBuffer(const StagedDeviceBuffer&) = delete;
  StagedDeviceBuffer& operator=(const StagedDeviceBuffer&) = delete;
  void* bytes() override { return p_; }
  size_t size_bytes() const override { return bytes_; }
  void upload_bytes(std::span<const std::byte> host) override {
    DLPERF_ASSERT(host.size() == bytes_, "upload size mismatch");
    DLPERF_CHECK(cudaMemcpy(p_, host.data(), host.size(), cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy may return before its DMA lands, and the copy-out stream
    // is not ordered after the legacy stream: the bytes must be there before a collective reads them.
    DLPERF_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void download_bytes(std::span<std::byte> host) override {
    DLPERF_ASSERT(host.size() == bytes_, "download size mismatch");
    DLPERF_CHECK(cudaMemcpy(host.data(), p_, host.size(), cudaMemcpyDeviceToHost));
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, cudaStream_t compute)
    : host_(std::move(host)), compute_(compute) {
  DLPERF_ASSERT(host_->memory_space() == MemorySpace::host, "staging needs a host-memory communicator");
  DLPERF_CHECK(cudaGetDevice(&device_));
  thread_ = std::thread([this] { run(); });
}

StagedCommunicator::~StagedCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // a job blocked in MPI ends within the MPI communicator's timeout
  cudaStreamSynchronize(in_.get());
  cudaStreamSynchronize(out_.get());
  for (auto& [key, p] : staging_) cudaFreeHost(p);
}

void* StagedCommunicator::staging_bytes(const void* device, size_t bytes) {
  void*& p = staging_[{device, bytes}];
  if (!p && bytes > 0) DLPERF_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return p;
}

void StagedCommunicator::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void StagedCommunicator::run() {
  cudaSetDevice(device_);  // this thread's copies and event waits belong to the same GPU
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

// Runs work for s on the staging thread; marks s done (with the error, if any) and wakes waiters.
void StagedCommunicator::run_job(const std::shared_ptr<State>& s, const std::function<void()>& work) {
  try {
    work();
  } catch (const std::exception& e) {
    s->error = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    s->completed = CommClock::now();
    s->done.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
}

CommRequest StagedCommunicator::staged(CommOp op, size_t bytes, const void* from, void* to, size_t copy_bytes,
                                       std::function<void(State&)> work) {
  auto s = std::make_shared<State>();
  s->op = op;
  s->seq = next_seq_++;
  s->bytes = bytes;
  s->started = CommClock::now();
  // Out: after everything the compute stream has queued so far (the bucket's gradients).
  DLPERF_CHECK(cudaEventRecord(produced_.get(), compute_));
  DLPERF_CHECK(cudaStreamWaitEvent(out_.get(), produced_.get(), 0));
  DLPERF_CHECK(cudaMemcpyAsync(to, from, copy_bytes, cudaMemcpyDeviceToHost, out_.get()));
  DLPERF_CHECK(cudaEventRecord(s->copied.get(), out_.get()));
  post([this, s, work = std::move(work)] {
    run_job(s, [&] {
      DLPERF_CHECK(cudaEventSynchronize(s->copied.get()));
      s->started = CommClock::now();  // the collective itself starts now
      work(*s);
      DLPERF_CHECK(cudaEventRecord(s->returned.get(), in_.get()));
    });
  });
  return CommRequest(s);
}

CommRequest StagedCommunicator::allreduce_start(const void* send, void* recv, size_t count, DataType type) {
  if (!supports(type))
    throw Error(ErrorKind::internal, std::string("the staged communicator cannot sum ") + to_string(type) + " (its host communicator has no such type)");
  const size_t bytes = count * size_of(type);
  void* p = staging<void>(recv, bytes);
  return staged(CommOp::allreduce_sum, bytes, send, p, bytes, [this, recv, count, type, bytes, p](State&) {
    CommRequest r = host_->allreduce_start(p, p, count, type);
    host_->wait(r);
    DLPERF_CHECK(cudaMemcpyAsync(recv, p, bytes, cudaMemcpyHostToDevice, in_.get()));
  });
}

CommRequest StagedCommunicator::reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) {
  DLPERF_ASSERT(counts.size() == static_cast<size_t>(size()), "one block per rank");
  size_t total = 0;
  for (size_t n : counts) total += n;
  const size_t mine = counts[static_cast<size_t>(rank())];
  float* out = staging<float>(send, total * sizeof(float));
  float* in = staging<float>(recv, mine * sizeof(float));
  std::vector<size_t> blocks(counts.begin(), counts.end());
  return staged(CommOp::reduce_scatter_sum, total * sizeof(float), send, out, total * sizeof(float), [this, recv, mine, out, in, blocks](State&) {
    CommRequest r = host_->reduce_scatter_start(out, in, blocks);
    host_->wait(r);
    DLPERF_CHECK(cudaMemcpyAsync(recv, in, mine * sizeof(float), cudaMemcpyHostToDevice, in_.get()));
  });
}

CommRequest StagedCommunicator::all_gather_start(const float* send, float* recv, std::span<const size_t> counts) {
  DLPERF_ASSERT(counts.size() == static_cast<size_t>(size()), "one block per rank");
  size_t total = 0, at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < rank()) at += counts[r];
    total += counts[r];
  }
  const size_t mine = counts[static_cast<size_t>(rank())];
  float* all = staging<float>(recv, total * sizeof(float));
  std::vector<size_t> blocks(counts.begin(), counts.end());
  // This rank's block goes where the host's in-place all-gather expects it.
  return staged(CommOp::all_gather, total * sizeof(float), send, all ? all + at : nullptr, mine * sizeof(float),
                [this, recv, total, at, all, blocks](State&) {
                  CommRequest r = host_->all_gather_start(all + at, all, blocks);
                  host_->wait(r);
                  DLPERF_CHECK(cudaMemcpyAsync(recv, all, total * sizeof(float), cudaMemcpyHostToDevice, in_.get()));
                });
}

bool StagedCommunicator::test(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "test() on an empty request");
  auto* s = request.state_as<State>();
  if (!s->done.load(std::memory_order_acquire)) return false;
  if (!s->error.empty()) throw Error(ErrorKind::fault, "staged " + describe_request(*s) + ": " + s->error);
  // Complete once the result is back in device memory (the copy queued on in_).
  const cudaError_t q = cudaEventQuery(s->returned.get());
  if (q == cudaErrorNotReady) return false;
  DLPERF_CHECK(q);
  return true;
}

void StagedCommunicator::wait(CommRequest& request) {
  wait_job(request);
  // The result in device memory too: a caller may read it at once (download_bytes, a host copy).
  DLPERF_CHECK(cudaEventSynchronize(request.state_as<State>()->returned.get()));
}

void StagedCommunicator::wait_job(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "wait() on an empty request");
  auto* s = request.state_as<State>();
  // The MPI wait inside the job is bounded by the timeout; allow it that, and the copies.
  const auto deadline = CommClock::now() + 2 * options().timeout;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_cv_.wait_until(lock, deadline, [s] { return s->done.load(std::memory_order_acquire); }))
      throw Error(ErrorKind::fault, "staged " + describe_request(*s) + ": not complete after twice --timeout (" + error_identity() + ")");
  }
  if (!s->error.empty()) throw Error(ErrorKind::fault, "staged " + describe_request(*s) + ": " + s->error);
}

void StagedCommunicator::join(CommRequest& request) {
  wait_job(request);  // the MPI part on the host; the copy back is the compute stream's to wait for
  DLPERF_CHECK(cudaStreamWaitEvent(compute_, request.state_as<State>()->returned.get(), 0));
}

void StagedCommunicator::broadcast(float* data, size_t count, int root) {
  auto s = std::make_shared<State>();
  s->op = CommOp::broadcast;
  s->seq = next_seq_++;
  s->bytes = count * sizeof(float);
  s->started = CommClock::now();
  DLPERF_CHECK(cudaStreamSynchronize(compute_));  // setup, outside the timed loop
  post([this, s, data, count, root] {
    run_job(s, [&] {
      PinnedHostBuffer<float> host(count);
      DLPERF_CHECK(cudaMemcpy(host.get(), data, count * sizeof(float), cudaMemcpyDeviceToHost));
      host_->broadcast(host.get(), count, root);
      DLPERF_CHECK(cudaMemcpy(data, host.get(), count * sizeof(float), cudaMemcpyHostToDevice));
    });
  });
  CommRequest r(s);
  wait(r);
}

void StagedCommunicator::barrier() {
  auto s = std::make_shared<State>();
  s->op = CommOp::barrier;
  s->seq = next_seq_++;
  s->started = CommClock::now();
  post([this, s] { run_job(s, [&] { host_->barrier(); }); });
  CommRequest r(s);
  wait(r);
}

std::unique_ptr<CommBuffer> StagedCommunicator::make_byte_buffer(size_t bytes) { return std::make_unique<StagedDeviceBuffer>(bytes); }

}  // namespace dlperf
