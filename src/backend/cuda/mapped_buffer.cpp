#include "backend/cuda/mapped_buffer.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace dlperf::cuda {
namespace {

// The driver's virtual memory functions, looked up once through the runtime.
struct Driver {
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuDeviceGet_v2000 device = nullptr;
  PFN_cuDeviceGetAttribute_v2000 attribute = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  std::string missing;  // the first function the driver did not give, "" when all are there
};

template <class F>
void look_up(Driver& d, F& fn, const char* symbol, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    if (d.missing.empty()) d.missing = symbol;
    return;
  }
  fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    look_up(x, x.reserve, "cuMemAddressReserve", 10020);
    look_up(x, x.address_free, "cuMemAddressFree", 10020);
    look_up(x, x.create, "cuMemCreate", 10020);
    look_up(x, x.release, "cuMemRelease", 10020);
    look_up(x, x.map, "cuMemMap", 10020);
    look_up(x, x.unmap, "cuMemUnmap", 10020);
    look_up(x, x.set_access, "cuMemSetAccess", 10020);
    look_up(x, x.granularity, "cuMemGetAllocationGranularity", 10020);
    look_up(x, x.device, "cuDeviceGet", 2000);
    look_up(x, x.attribute, "cuDeviceGetAttribute", 2000);
    look_up(x, x.error_name, "cuGetErrorName", 6000);
    return x;
  }();
  return d;
}

std::mutex stats_mutex;
MappingStats stats;

// One driver call, timed into the process's MappingStats.
class Timed {
 public:
  explicit Timed(int64_t MappingStats::*what) : what_(what), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::lock_guard<std::mutex> lock(stats_mutex);
    ++(stats.*what_);
    stats.seconds += s;
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  int64_t MappingStats::*what_;
  std::chrono::steady_clock::time_point t0_;
};

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

}  // namespace
}  // namespace dlperf::cuda

namespace dlperf {
template <>
struct StatusTraits<CUresult> {
  static constexpr const char* library = "CUDA driver";
  static bool ok(CUresult s) { return s == CUDA_SUCCESS; }
  static bool out_of_memory(CUresult s) { return s == CUDA_ERROR_OUT_OF_MEMORY; }
  static std::string describe(CUresult s) {
    const char* name = nullptr;
    if (cuda::driver().error_name && cuda::driver().error_name(s, &name) == CUDA_SUCCESS && name) return name;
    return "CUresult " + std::to_string(static_cast<int>(s));
  }
};
}  // namespace dlperf

namespace dlperf::cuda {

class MappedBuffer;

// Every mapped buffer's decommits on one backend, in stream order: a commit anywhere first
// unmaps what every earlier decommit gave back (the sharded master's chunks before the
// gradients are mapped, one bucket's before the next bucket's), so memory is bounded across
// buffers, not only within one.
class MappingQueue {
 public:
  explicit MappingQueue(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  void push(Event done, MappedBuffer* owner, uint64_t generation, std::vector<size_t> chunks) {
    entries_.push_back({std::move(done), owner, generation, std::move(chunks)});
  }
  // Unmaps the chunks of every decommit whose work has completed; with wait, of every decommit
  // (waiting for its work, bounded by the timeout: a collective that never completes).
  void reap(bool wait);
  void forget(const MappedBuffer* owner) {  // a buffer going away unmaps its chunks itself
    std::erase_if(entries_, [owner](const Entry& e) { return e.owner == owner; });
  }
  Event take_event() {
    if (spare_.empty()) return Event(Event::ordering);
    Event e = std::move(spare_.back());
    spare_.pop_back();
    return e;
  }

 private:
  struct Entry {
    Event done;
    MappedBuffer* owner;
    uint64_t generation;
    std::vector<size_t> chunks;
  };
  std::chrono::milliseconds timeout_;
  std::deque<Entry> entries_;
  std::vector<Event> spare_;  // recorded and reaped: reused
};

// The physical chunks shared chunks take turns in (Buffer::share), counted in the context's
// memory; released after the last buffer mapping them has unmapped its chunks and let go.
class CudaSharePool final : public Buffer::SharePool {
 public:
  CudaSharePool(Ctx ctx, const CUmemAllocationProp& prop, size_t chunk) : ctx_(std::move(ctx)), prop_(prop), chunk_(chunk) {}
  CudaSharePool(const CudaSharePool&) = delete;
  CudaSharePool& operator=(const CudaSharePool&) = delete;
  ~CudaSharePool() override {
    for (CUmemGenericAllocationHandle h : chunks_) {
      Timed t(&MappingStats::releases);
      driver().release(h);
    }
    ctx_->memory.sub(static_cast<int64_t>(chunks_.size() * chunk_));
  }
  void grow(size_t granules) override {
    while (chunks_.size() < granules) {
      CUmemGenericAllocationHandle h = 0;
      {
        Timed t(&MappingStats::creates);
        DLPERF_CHECK(driver().create(&h, chunk_, &prop_, 0));
      }
      chunks_.push_back(h);
      ctx_->memory.add(static_cast<int64_t>(chunk_));
    }
  }
  CUmemGenericAllocationHandle chunk(size_t k) const { return chunks_.at(k); }

 private:
  Ctx ctx_;
  CUmemAllocationProp prop_;
  size_t chunk_;
  std::vector<CUmemGenericAllocationHandle> chunks_;
};

class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(Ctx ctx, std::shared_ptr<MappingQueue> queue, size_t n, bool committed)
      : ctx_(std::move(ctx)), queue_(std::move(queue)), n_(n), prop_(device_prop(ctx_->device)) {
    const Driver& d = driver();
    DLPERF_CHECK(d.granularity(&chunk_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    DLPERF_ASSERT(chunk_ > 0 && chunk_ % 64 == 0, "a mapping granularity of whole cache lines");
    const size_t bytes = std::max<size_t>(n_ * sizeof(float), 1);
    chunks_ = (bytes + chunk_ - 1) / chunk_;
    DLPERF_ASSERT(chunk_ % kPage == 0, "a chunk of whole pages");
    per_chunk_ = chunk_ / kPage;
    // Every page starts decommitted (those past the end stay so); committed: the whole buffer
    // is committed below.
    gone_.assign(chunks_ * per_chunk_, true);
    gone_in_.assign(chunks_, per_chunk_);
    state_.assign(chunks_, State::unmapped);
    handle_.assign(chunks_, 0);
    generation_.assign(chunks_, 0);
    DLPERF_CHECK(d.reserve(&base_, chunks_ * chunk_, chunk_, 0, 0));
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (committed) commit(0, n_);  // maps and zero-fills every chunk
  }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer() override {
    // Queued work may still use the buffer: wait for the stream, then give everything back.
    cudaStreamSynchronize(ctx_->s());
    queue_->forget(this);
    const Driver& d = driver();
    for (size_t c = 0; c < chunks_; ++c)
      if (state_[c] == State::shared || state_[c] == State::granted) d.unmap(address(c), chunk_);  // the pool's chunk
      else if (state_[c] != State::unmapped) {
        d.unmap(address(c), chunk_);
        pool_.push_back(handle_[c]);
      }
    for (CUmemGenericAllocationHandle h : pool_) d.release(h);
    ctx_->memory.sub(static_cast<int64_t>((held_) * chunk_));
    d.address_free(base_, chunks_ * chunk_);
  }

  float* data() override { return reinterpret_cast<float*>(base_); }
  size_t size() const override { return n_; }
  void read(std::span<float> out, size_t offset) const override {
    DLPERF_ASSERT(offset + out.size() <= n_, "buffer read in range");
    assert_mapped(offset, out.size());
    DLPERF_CHECK(cudaMemcpyAsync(out.data(), data_at(offset), out.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();
  }
  void write(std::span<const float> in, size_t offset) override {
    DLPERF_ASSERT(offset + in.size() <= n_, "buffer write in range");
    assert_mapped(offset, in.size());
    DLPERF_CHECK(cudaMemcpyAsync(data_at(offset), in.data(), in.size_bytes(), cudaMemcpyHostToDevice, ctx_->s()));
    ctx_->sync();
  }
  // Decommitted chunks already read as zero once committed: only the mapped ones are cleared.
  void zero() override {
    for_each_run(0, chunks_, [&](size_t c) { return state_[c] == State::mapped || state_[c] == State::shared; },
                 [&](size_t first, size_t count) { DLPERF_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(address(first)), 0, count * chunk_, ctx_->s())); });
  }

  // The whole pages inside the range are decommitted; a chunk goes once all its pages are
  // (whatever ranges they came from: a chunk two buckets share goes with the second).
  size_t decommit(size_t offset, size_t count) override {
    DLPERF_ASSERT(offset + count <= n_, "buffer range in bounds");
    const size_t p0 = (offset * sizeof(float) + kPage - 1) / kPage, p1 = (offset + count) * sizeof(float) / kPage;
    std::vector<size_t> freed;
    for (size_t p = p0; p < p1; ++p) {
      if (gone_[p]) continue;
      gone_[p] = true;
      const size_t c = p / per_chunk_;
      if (++gone_in_[c] == per_chunk_ && state_[c] == State::mapped) {
        state_[c] = State::releasing;
        generation_[c] = next_generation_;
        freed.push_back(c);
      }
    }
    if (freed.empty()) return 0;
    // The chunks go once the work queued so far (the last reads and writes of them) is done.
    Event done = queue_->take_event();
    DLPERF_CHECK(cudaEventRecord(done.get(), ctx_->s()));
    const size_t bytes = freed.size() * chunk_;
    queue_->push(std::move(done), this, next_generation_++, std::move(freed));
    queue_->reap(false);
    return bytes;
  }

  size_t commit(size_t offset, size_t count) override {
    DLPERF_ASSERT(offset + count <= n_, "buffer range in bounds");
    if (count == 0) return 0;
    // Every page the range touches is committed; a chunk all of whose pages were decommitted is
    // backed again (mapped, or kept where its unmap is still pending) and reads as zero.
    const size_t p0 = offset * sizeof(float) / kPage, p1 = ((offset + count) * sizeof(float) + kPage - 1) / kPage;
    const size_t first = p0 / per_chunk_, last = std::min(chunks_, (p1 + per_chunk_ - 1) / per_chunk_);
    queue_->reap(false);
    size_t taken = 0, to_map = 0;
    std::vector<size_t> opened;  // shared chunks all of whose pages were decommitted: zero-filled below
    for (size_t c = first; c < last; ++c) {
      if (state_[c] == State::shared && gone_in_[c] == per_chunk_) opened.push_back(c);
      if (gone_in_[c] < per_chunk_ || state_[c] == State::shared) continue;  // backed: its committed pages kept it, or shared
      if (state_[c] == State::releasing) {  // still mapped: keep it (its pending unmap skips it)
        state_[c] = State::cleared;
        ++taken;
      } else {
        ++to_map;
      }
    }
    for (size_t p = p0; p < p1; ++p)
      if (gone_[p]) {
        gone_[p] = false;
        --gone_in_[p / per_chunk_];
      }
    if (to_map > 0) {
      // A commit of the whole buffer (its first, or the gradients made whole once) does not size
      // the pool: only the ranges that come and go do (ZeRO: a bucket).
      if (last - first < chunks_) most_mapped_ = std::max(most_mapped_, to_map);
      // Bound the memory held: every earlier decommit's chunks are unmapped before new ones are
      // mapped (their work on the stream done), so at most this range's chunks are added.
      queue_->reap(true);
      const Driver& d = driver();
      for_each_run(first, last, [&](size_t c) { return state_[c] == State::unmapped; }, [&](size_t run, size_t len) {
        for (size_t c = run; c < run + len; ++c) {
          handle_[c] = take_handle();
          Timed t(&MappingStats::maps);
          DLPERF_CHECK(d.map(address(c), chunk_, 0, handle_[c], 0));
          state_[c] = State::cleared;
        }
        Timed t(&MappingStats::grants);  // one access grant for the run
        DLPERF_CHECK(d.set_access(address(run), len * chunk_, &access_, 1));
      });
      taken += to_map;
    }
    // Decommitted chunks read as zero, as the CPU backend's pages do; shared ones too.
    for_each_run(first, last, [&](size_t c) { return std::binary_search(opened.begin(), opened.end(), c); }, [&](size_t run, size_t len) {
      DLPERF_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(address(run)), 0, len * chunk_, ctx_->s()));
    });
    for_each_run(first, last, [&](size_t c) { return state_[c] == State::cleared; }, [&](size_t run, size_t len) {
      DLPERF_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(address(run)), 0, len * chunk_, ctx_->s()));
      for (size_t c = run; c < run + len; ++c) state_[c] = State::mapped;
    });
    return taken * chunk_;
  }

  // Each chunk given a backing is mapped to that pool chunk (one access grant per run), for
  // good. Its pages' bookkeeping goes on as before, but a shared chunk is never unmapped or
  // zero-filled by decommit and commit (state shared).
  size_t share_granularity() const override { return chunk_; }
  size_t decommit_unit() const override { return kPage; }
  bool shareable(size_t c) const override {
    if (c >= chunks_) return false;
    queue_->reap(true);  // the decommits' chunks unmapped (once their work is done)
    return state_[c] == State::unmapped && gone_in_[c] == per_chunk_;
  }
  std::shared_ptr<SharePool> make_share_pool() override { return std::make_shared<CudaSharePool>(ctx_, prop_, chunk_); }
  void drop_cached() override {
    queue_->reap(true);  // the decommits' chunks unmapped into the cache first
    most_mapped_ = 0;    // later commits size it again
    trim_pool();
  }
  void back(std::span<const size_t> backing, const std::shared_ptr<SharePool>& pool) override {
    const auto* mine = dynamic_cast<const CudaSharePool*>(pool.get());
    DLPERF_ASSERT(mine != nullptr, "a mapped buffer is backed by a pool of physical chunks");
    const Driver& d = driver();
    pools_.push_back(pool);  // before mapping: the destructor unmaps what was mapped
    for (size_t c = 0; c < std::min(backing.size(), chunks_); ++c)
      if (backing[c] != kNotShared) {
        Timed t(&MappingStats::maps);
        DLPERF_CHECK(d.map(address(c), chunk_, 0, mine->chunk(backing[c]), 0));
        state_[c] = State::granted;
      }
    for_each_run(0, chunks_, [&](size_t c) { return state_[c] == State::granted; }, [&](size_t run, size_t len) {
      Timed t(&MappingStats::grants);
      DLPERF_CHECK(d.set_access(address(run), len * chunk_, &access_, 1));
      for (size_t c = run; c < run + len; ++c) state_[c] = State::shared;
    });
  }
  // After the queued work: each shared chunk unmapped, every page of it decommitted; the pool
  // let go.
  void unshare() override {
    if (pools_.empty()) return;
    ctx_->sync();
    const Driver& d = driver();
    for (size_t c = 0; c < chunks_; ++c) {
      if (state_[c] != State::shared && state_[c] != State::granted) continue;
      {
        Timed t(&MappingStats::unmaps);
        DLPERF_CHECK(d.unmap(address(c), chunk_));
      }
      state_[c] = State::unmapped;
      for (size_t p = c * per_chunk_; p < (c + 1) * per_chunk_; ++p) gone_[p] = true;
      gone_in_[c] = per_chunk_;
    }
    pools_.clear();
  }

  // Called by the queue once decommit `generation`'s work is done: unmaps those of its chunks
  // that were not committed again since.
  void unmap_released(uint64_t generation, const std::vector<size_t>& chunks) {
    for (size_t c : chunks) {
      if (state_[c] != State::releasing || generation_[c] != generation) continue;
      Timed t(&MappingStats::unmaps);
      DLPERF_CHECK(driver().unmap(address(c), chunk_));
      state_[c] = State::unmapped;
      pool_.push_back(std::exchange(handle_[c], 0));
    }
    trim_pool();
  }

 private:
  // mapped: backed (some page committed); releasing: every page decommitted, unmapped once its
  // event completes; cleared: backed again, to be zero-filled (a transient state inside
  // commit); unmapped; shared: mapped to a pool chunk (share) until unshare; granted: shared,
  // its access not yet granted (a transient state inside share).
  enum class State : uint8_t { mapped, releasing, cleared, unmapped, shared, granted };
  static constexpr size_t kPage = 4096;  // the unit decommit and commit count in, as the CPU's pages

  CUdeviceptr address(size_t c) const { return base_ + c * chunk_; }
  float* data_at(size_t offset) const { return reinterpret_cast<float*>(base_) + offset; }
  void assert_mapped(size_t offset, size_t count) const {
    if (count == 0) return;
    for (size_t c = offset * sizeof(float) / chunk_; c <= ((offset + count) * sizeof(float) - 1) / chunk_; ++c)
      DLPERF_ASSERT(state_[c] == State::mapped || state_[c] == State::shared, "a mapped buffer is read or written only where it is committed");
  }
  template <class Pred, class Fn>
  static void for_each_run(size_t first, size_t last, Pred in_run, Fn fn) {
    for (size_t c = first; c < last;) {
      if (!in_run(c)) {
        ++c;
        continue;
      }
      size_t e = c;
      while (e < last && in_run(e)) ++e;
      fn(c, e - c);
      c = e;
    }
  }

  CUmemGenericAllocationHandle take_handle() {
    if (!pool_.empty()) {
      const CUmemGenericAllocationHandle h = pool_.back();
      pool_.pop_back();
      return h;
    }
    CUmemGenericAllocationHandle h = 0;
    {
      Timed t(&MappingStats::creates);
      DLPERF_CHECK(driver().create(&h, chunk_, &prop_, 0));
    }
    ++held_;
    ctx_->memory.add(static_cast<int64_t>(chunk_));
    return h;
  }
  // Keeps at most the chunks the largest commit mapped, for the next commits.
  void trim_pool() {
    while (pool_.size() > most_mapped_) {
      Timed t(&MappingStats::releases);
      DLPERF_CHECK(driver().release(pool_.back()));
      pool_.pop_back();
      --held_;
      ctx_->memory.sub(static_cast<int64_t>(chunk_));
    }
  }

  Ctx ctx_;
  std::shared_ptr<MappingQueue> queue_;
  size_t n_;
  CUmemAllocationProp prop_;
  CUmemAccessDesc access_{};
  size_t chunk_ = 0, chunks_ = 0, per_chunk_ = 0;
  std::vector<bool> gone_;        // per page: decommitted
  std::vector<size_t> gone_in_;   // per chunk: its decommitted pages
  CUdeviceptr base_ = 0;
  std::vector<State> state_;
  std::vector<CUmemGenericAllocationHandle> handle_;  // per chunk, while mapped
  std::vector<uint64_t> generation_;                  // per chunk: the decommit that is releasing it
  uint64_t next_generation_ = 1;
  std::vector<CUmemGenericAllocationHandle> pool_;  // physical chunks not mapped now
  size_t most_mapped_ = 0;                          // the most chunks one commit mapped
  size_t held_ = 0;                                 // physical chunks, mapped or pooled (counted)
  std::vector<std::shared_ptr<SharePool>> pools_;   // those backing shared chunks (one, in practice)
};

void MappingQueue::reap(bool wait) {
  while (!entries_.empty()) {
    Entry& e = entries_.front();
    cudaError_t q = cudaEventQuery(e.done.get());
    if (q == cudaErrorNotReady) {
      if (!wait) return;
      {
        std::lock_guard<std::mutex> lock(stats_mutex);
        ++stats.waits;
      }
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      while (q == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > deadline)
          throw Error(ErrorKind::fault, "device memory to be unmapped was still in use by queued work after " +
                                            std::to_string(timeout_.count() / 1000) + " s (--timeout) (" + error_identity() + ")");
        std::this_thread::yield();
        q = cudaEventQuery(e.done.get());
      }
    }
    DLPERF_CHECK(q);
    Entry done = std::move(e);
    entries_.pop_front();
    spare_.push_back(std::move(done.done));
    done.owner->unmap_released(done.generation, done.chunks);
  }
}

bool mapped_buffers_supported(const Context& ctx) {
  const Driver& d = driver();
  if (!d.missing.empty()) return false;
  CUdevice dev = 0;
  int supported = 0;
  if (d.device(&dev, ctx.device) != CUDA_SUCCESS) return false;
  if (d.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS) return false;
  return supported != 0;
}

std::shared_ptr<MappingQueue> make_mapping_queue(std::chrono::milliseconds timeout) { return std::make_shared<MappingQueue>(timeout); }

std::unique_ptr<Buffer> make_mapped_buffer(Ctx ctx, std::shared_ptr<MappingQueue> queue, size_t elems, bool committed) {
  return std::make_unique<MappedBuffer>(std::move(ctx), std::move(queue), elems, committed);
}

MappingStats mapping_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex);
  return stats;
}

MappingStats operator-(const MappingStats& a, const MappingStats& b) {
  return {a.maps - b.maps, a.unmaps - b.unmaps, a.grants - b.grants, a.creates - b.creates, a.releases - b.releases,
          a.seconds - b.seconds, a.waits - b.waits};
}

std::string mapping_summary(const MappingStats& whole, const MappingStats& at_start, int64_t measured) {
  if (whole.maps + whole.unmaps == 0) return {};
  char line[512];
  int n = std::snprintf(line, sizeof line, "device memory remapped (this rank): ");
  if (measured > 0) {
    const MappingStats w = whole - at_start;
    const double k = 1.0 / static_cast<double>(measured);
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                       "a measured step %.1f chunk maps, %.1f unmaps, %.1f creates, %.1f releases, %.1f waits for queued work, "
                       "%.2f ms in the driver; whole run ",
                       static_cast<double>(w.maps) * k, static_cast<double>(w.unmaps) * k, static_cast<double>(w.creates) * k,
                       static_cast<double>(w.releases) * k, static_cast<double>(w.waits) * k, 1e3 * w.seconds * k);
  }
  std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                "%lld chunk maps, %lld unmaps, %lld creates, %lld releases, %lld waits for queued work; %.3f s in the driver\n",
                static_cast<long long>(whole.maps), static_cast<long long>(whole.unmaps), static_cast<long long>(whole.creates),
                static_cast<long long>(whole.releases), static_cast<long long>(whole.waits), whole.seconds);
  return line;
}

}  // namespace dlperf::cuda
