// MpiCommunicator; the progress design is explained in mpi_communicator.h.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <memory>

#include "core/check.h"
#include "core/error.h"

namespace dlperf {

// MPI counts are int: larger buffers are issued as several operations under one request.
struct MpiCommunicator::State : RequestState {
  std::vector<MPI_Request> parts;
  std::vector<int> counts, displs;  // the v-collectives' arrays: MPI reads them until completion
};

namespace {

constexpr size_t kMaxPart = size_t{1} << 30;  // elements per MPI call (< INT_MAX)

class HostBuffer final : public CommBuffer {
 public:
  explicit HostBuffer(size_t bytes) : data_(new std::byte[bytes]()), size_(bytes) {}  // new: 16-byte aligned
  void* bytes() override { return data_.get(); }
  size_t size_bytes() const override { return size_; }
  void upload_bytes(std::span<const std::byte> host) override {
    DLPERF_ASSERT(host.size() == size_, "upload size mismatch");
    std::copy(host.begin(), host.end(), data_.get());
  }
  void download_bytes(std::span<std::byte> host) override {
    DLPERF_ASSERT(host.size() == size_, "download size mismatch");
    std::copy(data_.get(), data_.get() + size_, host.begin());
  }

 private:
  std::unique_ptr<std::byte[]> data_;  // (size_)
  size_t size_;
};

// MPI's predefined type for an element type; MPI_DATATYPE_NULL where MPI has none.
MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::int8: return MPI_INT8_T;
    case DataType::uint8: return MPI_UINT8_T;
    case DataType::int32: return MPI_INT32_T;
    case DataType::uint32: return MPI_UINT32_T;
    case DataType::int64: return MPI_INT64_T;
    case DataType::uint64: return MPI_UINT64_T;
    case DataType::float32: return MPI_FLOAT;
    case DataType::float64: return MPI_DOUBLE;
    case DataType::float16:
    case DataType::bfloat16: return MPI_DATATYPE_NULL;  // not in the MPI standard
  }
  return MPI_DATATYPE_NULL;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, const WorldInfo& world, CommOptions options)
    : rank_(world.rank),
      size_(world.size),
      options_(options),
      comm_(MpiComm::dup(parent)),
      heartbeat_(parent, world.hosts, options.heartbeat_period) {
  progress_ = std::thread([this] { progress_loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  bool pending = false;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    pending = !active_.empty();
  }
  work_cv_.notify_all();
  progress_.join();
  // Unwinding from a fault, or operations never completed: peers may be gone, so neither wait
  // for their goodbyes nor free a communicator with pending operations (the top level is about
  // to MPI_Abort).
  if (pending || std::uncaught_exceptions() > 0) {
    heartbeat_.fast_shutdown();
    comm_.leak();
  }
}

template <class Issue>
CommRequest MpiCommunicator::start(CommOp op, size_t bytes, Issue&& issue) {
  auto s = std::make_shared<State>();
  s->op = op;
  s->seq = next_seq_++;
  s->bytes = bytes;
  s->started = CommClock::now();
  heartbeat_.note_started(s->seq);
  const int rc = issue(*s);
  if (rc != MPI_SUCCESS) fail(*s, "could not start: " + mpi_error_string(rc));
  {
    std::lock_guard lock(mu_);
    active_.push_back(s);
  }
  work_cv_.notify_one();
  return CommRequest(s);
}

bool MpiCommunicator::supports(DataType type) const { return mpi_type(type) != MPI_DATATYPE_NULL; }

CommRequest MpiCommunicator::allreduce_start(const void* send, void* recv, size_t count, DataType type) {
  const MPI_Datatype mt = mpi_type(type);
  if (mt == MPI_DATATYPE_NULL)
    throw Error(ErrorKind::usage, std::string("MPI has no ") + to_string(type) + " type: reduce it over NCCL or as float");
  const size_t elem = size_of(type);
  auto* out = static_cast<std::byte*>(recv);
  const auto* in = static_cast<const std::byte*>(send);
  return start(CommOp::allreduce_sum, count * elem, [&](State& st) {
    auto& parts = st.parts;
    for (size_t off = 0; off < count || (count == 0 && off == 0); off += kMaxPart) {
      const int n = static_cast<int>(std::min(kMaxPart, count - off));
      parts.push_back(MPI_REQUEST_NULL);
      const void* from = send == recv ? MPI_IN_PLACE : static_cast<const void*>(in + off * elem);
      const int rc = MPI_Iallreduce(from, out + off * elem, n, mt, MPI_SUM, comm_.get(), &parts.back());
      if (rc != MPI_SUCCESS || count == 0) return rc;
    }
    return MPI_SUCCESS;
  });
}

namespace {
// MPI's int counts and displacements of a v-collective; each block and the total below INT_MAX.
void int_blocks(std::span<const size_t> counts, int size, std::vector<int>& c, std::vector<int>& d) {
  DLPERF_ASSERT(counts.size() == static_cast<size_t>(size), "one block per rank");
  size_t off = 0;
  for (size_t n : counts) {
    DLPERF_ASSERT(n < kMaxPart && off < kMaxPart, "reduce-scatter/all-gather blocks below 2^30 elements");
    c.push_back(static_cast<int>(n));
    d.push_back(static_cast<int>(off));
    off += n;
  }
}
}  // namespace

CommRequest MpiCommunicator::reduce_scatter_start(const float* send, float* recv, std::span<const size_t> counts) {
  size_t total = 0;
  for (size_t n : counts) total += n;
  // bytes: what this rank's block brings in, as nccl-tests counts a reduce-scatter's size (recvcount x type) x ranks.
  return start(CommOp::reduce_scatter_sum, total * sizeof(float), [&](State& st) {
    int_blocks(counts, size_, st.counts, st.displs);
    st.parts.push_back(MPI_REQUEST_NULL);
    return MPI_Ireduce_scatter(send, recv, st.counts.data(), MPI_FLOAT, MPI_SUM, comm_.get(), &st.parts.back());
  });
}

CommRequest MpiCommunicator::all_gather_start(const float* send, float* recv, std::span<const size_t> counts) {
  size_t total = 0;
  for (size_t n : counts) total += n;
  return start(CommOp::all_gather, total * sizeof(float), [&](State& st) {
    int_blocks(counts, size_, st.counts, st.displs);
    st.parts.push_back(MPI_REQUEST_NULL);
    const auto me = static_cast<size_t>(rank_);
    const bool in_place = send == recv + st.displs[me];
    return MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send, in_place ? 0 : st.counts[me], in_place ? MPI_DATATYPE_NULL : MPI_FLOAT, recv,
                           st.counts.data(), st.displs.data(), MPI_FLOAT, comm_.get(), &st.parts.back());
  });
}

void MpiCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size_) throw Error(ErrorKind::internal, "broadcast root " + std::to_string(root) + " out of range");
  CommRequest r = start(CommOp::broadcast, count * sizeof(float), [&](State& st) {
    auto& parts = st.parts;
    for (size_t off = 0; off < count || (count == 0 && off == 0); off += kMaxPart) {
      const int n = static_cast<int>(std::min(kMaxPart, count - off));
      parts.push_back(MPI_REQUEST_NULL);
      const int rc = MPI_Ibcast(data + off, n, MPI_FLOAT, root, comm_.get(), &parts.back());
      if (rc != MPI_SUCCESS || count == 0) return rc;
    }
    return MPI_SUCCESS;
  });
  wait(r);
}

void MpiCommunicator::barrier() {
  CommRequest r = start(CommOp::barrier, 0, [&](State& st) {
    st.parts.push_back(MPI_REQUEST_NULL);
    return MPI_Ibarrier(comm_.get(), &st.parts.back());
  });
  wait(r);
}

bool MpiCommunicator::test(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "test() on an empty request");
  if (!request.completed()) return false;
  if (!request.state()->error.empty()) fail(*request.state(), request.state()->error);
  return true;
}

void MpiCommunicator::wait(CommRequest& request) {
  DLPERF_ASSERT(request.valid(), "wait() on an empty request");
  RequestState& s = *request.state();
  const auto deadline = CommClock::now() + options_.timeout;
  bool finished = false;
  {
    std::unique_lock lock(mu_);
    ++waiters_;
    work_cv_.notify_one();  // make the progress thread poll hard while we are blocked
    finished = done_cv_.wait_until(lock, deadline, [&] { return s.done.load(std::memory_order_acquire); });
    --waiters_;
  }
  if (!finished) {
    const double waited = std::chrono::duration<double>(options_.timeout).count();
    fail(s, "not complete after " + std::to_string(static_cast<int>(waited)) + " s (--timeout); " + heartbeat_.diagnose(s.seq));
  }
  if (!s.error.empty()) fail(s, s.error + "; " + heartbeat_.diagnose(s.seq));
}

void MpiCommunicator::fail(const RequestState& s, const std::string& why) {
  throw Error(ErrorKind::fault, "MPI " + describe_request(s) + ": " + why + " (" + error_identity() + ")");
}

void MpiCommunicator::progress_loop() {
  std::vector<std::shared_ptr<State>> round;
  auto sleep = std::chrono::microseconds(0);
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (active_.empty()) {
      work_cv_.wait(lock, [&] { return stop_ || !active_.empty(); });
      sleep = std::chrono::microseconds(0);
      continue;
    }
    round = active_;
    lock.unlock();

    // Only this thread touches the MPI_Requests once they are handed over.
    bool any_done = false;
    for (auto& s : round) {
      int flag = 0;
      const int rc = MPI_Testall(static_cast<int>(s->parts.size()), s->parts.data(), &flag, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        s->error = "failed: " + mpi_error_string(rc);
        flag = 1;
      }
      if (!flag) continue;
      s->completed = CommClock::now();
      s->done.store(true, std::memory_order_release);
      heartbeat_.note_completed(s->seq);
      any_done = true;
    }

    lock.lock();
    if (any_done) {
      std::erase_if(active_, [](const std::shared_ptr<State>& s) { return s->done.load(std::memory_order_relaxed); });
      done_cv_.notify_all();
      sleep = std::chrono::microseconds(0);
    } else if (waiters_ > 0) {
      lock.unlock();
      std::this_thread::yield();  // the caller is blocked: poll hard, it costs no compute
      lock.lock();
    } else {
      // Caller computing: back off so the compute threads keep their cores; a new request or a
      // waiter wakes us early.
      sleep = std::min(options_.max_poll_interval, std::max(sleep * 2, std::chrono::microseconds(5)));
      work_cv_.wait_for(lock, sleep, [&] { return stop_ || waiters_ > 0; });
    }
    round.clear();
  }
}

std::unique_ptr<CommBuffer> MpiCommunicator::make_byte_buffer(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

}  // namespace dlperf
