// CpuBackend: the oneDNN engine and stream, tensor and buffer allocation, the fused SGD,
// AdamW and LAMB updates, and the op factories (one file per op beside this one).
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>

#include "backend/onednn/ops.h"
#include "core/check.h"

namespace dlperf::onednn {
namespace {

// DLPERF_GUARD_DECOMMITTED=1: decommitted pages are also made inaccessible (mprotect), so an
// access before the range is committed again faults here, as it would on a GPU, whose freed
// chunks are unmapped (the CPU would otherwise read zeros and count a write late). A check for
// tests of ZeRO (tests/cli/zero_cli_test.sh), off in runs.
bool guard_decommitted() {
  static const bool on = [] {
    const char* v = std::getenv("DLPERF_GUARD_DECOMMITTED");
    return v && std::string(v) == "1";
  }();
  return on;
}

// The memory shared pages take turns in (Buffer::share): a memfd, its pages charged to the
// budget as it grows and refunded with it (after the last buffer mapping it lets go).
class CpuSharePool final : public Buffer::SharePool {
 public:
  CpuSharePool(MemoryBudget& budget, size_t page) : budget_(budget), page_(page), fd_(::memfd_create("dlperf-shared", MFD_CLOEXEC)) {
    if (fd_ < 0) throw_library_error("libc", "memfd_create", errno_string(), std::source_location::current());
  }
  CpuSharePool(const CpuSharePool&) = delete;
  CpuSharePool& operator=(const CpuSharePool&) = delete;
  ~CpuSharePool() override {
    ::close(fd_);  // mappings of it keep its pages until they go
    budget_.refund(static_cast<int64_t>(bytes_));
  }
  void grow(size_t granules) override {
    if (granules * page_ <= bytes_) return;
    const size_t more = granules * page_ - bytes_;
    budget_.charge(static_cast<int64_t>(more));  // throws past --memory-limit-mb before anything changes
    if (::ftruncate(fd_, static_cast<off_t>(granules * page_)) != 0) {
      budget_.refund(static_cast<int64_t>(more));
      throw_library_error("libc", "ftruncate", errno_string(), std::source_location::current());
    }
    bytes_ += more;
  }
  int fd() const { return fd_; }

 private:
  MemoryBudget& budget_;
  size_t page_;
  int fd_;
  size_t bytes_ = 0;
};

class CpuBuffer final : public Buffer {
 public:
  // committed false: the buffer starts decommitted (every whole page of it; see decommit). Its
  // untouched pages are the kernel's zero pages: nothing to madvise, only not to count. (The
  // charge follows the mapping here, which touches no page; only buffers under 1 MiB are
  // memset.) The budget holds what is committed: charged here, refunded as it changes and at
  // the end.
  CpuBuffer(MemoryBudget& budget, size_t n, bool committed)
      : budget_(budget),
        n_(n),
        memory_(round_up(n)),
        data_(static_cast<float*>(memory_.data())),
        page_(static_cast<size_t>(::sysconf(_SC_PAGESIZE))),
        released_(memory_.mapped() ? round_up(n) / page_ : 0, !committed),
        released_bytes_(committed ? 0 : released_.size() * page_),
        shared_(released_.size(), false),
        open_(released_.size(), false) {
    budget_.charge(committed_bytes());  // throws past --memory-limit-mb; memory_ is then unmapped
    if (!committed) protect(0, released_.size(), PROT_NONE);
  }
  CpuBuffer(const CpuBuffer&) = delete;
  CpuBuffer& operator=(const CpuBuffer&) = delete;
  ~CpuBuffer() override { budget_.refund(committed_bytes()); }  // a pool refunds its own pages
  float* data() override { return data_; }
  size_t size() const override { return n_; }
  void read(std::span<float> out, size_t offset) const override {
    DLPERF_ASSERT(offset + out.size() <= n_, "buffer read in range");
    std::memcpy(out.data(), data_ + offset, out.size_bytes());
  }
  void write(std::span<const float> in, size_t offset) override {
    DLPERF_ASSERT(offset + in.size() <= n_, "buffer write in range");
    std::memcpy(data_ + offset, in.data(), in.size_bytes());
  }
  void zero() override { std::memset(data_, 0, n_ * sizeof(float)); }
  // Pages are tracked one by one (a bit each), so the counter is exact: decommit drops the
  // committed whole pages inside the range (madvise DONTNEED: they cost nothing until touched
  // again, and then read as zero); commit counts every decommitted page the range touches. A
  // buffer that is not mmap'ed (under 1 MiB) keeps its memory and counts it throughout.
  size_t decommit(size_t offset, size_t count) override {
    DLPERF_ASSERT(offset + count <= n_, "buffer range in bounds");
    if (released_.empty()) return 0;
    const size_t first = (offset * sizeof(float) + page_ - 1) / page_, last = (offset + count) * sizeof(float) / page_;
    size_t freed = 0;
    for (size_t p = first; p < last; ++p) {
      if (shared_[p]) {
        if (open_[p]) open_[p] = false, protect(p, p + 1, PROT_NONE);
        continue;
      }
      if (released_[p]) continue;
      size_t q = p;  // a run of committed pages: one madvise
      while (q < last && !released_[q] && !shared_[q]) released_[q++] = true;
      if (::madvise(reinterpret_cast<char*>(data_) + p * page_, (q - p) * page_, MADV_DONTNEED) != 0)
        throw_library_error("libc", "madvise(MADV_DONTNEED)", errno_string(), std::source_location::current());
      protect(p, q, PROT_NONE);
      freed += (q - p) * page_;
      p = q - 1;
    }
    budget_.refund(static_cast<int64_t>(freed));
    released_bytes_ += freed;
    return freed;
  }
  size_t commit(size_t offset, size_t count) override {
    DLPERF_ASSERT(offset + count <= n_, "buffer range in bounds");
    if (released_.empty() || count == 0) return 0;
    const size_t first = offset * sizeof(float) / page_;
    const size_t last = std::min(released_.size(), ((offset + count) * sizeof(float) + page_ - 1) / page_);
    size_t taken = 0;
    for (size_t p = first; p < last; ++p) {
      if (shared_[p] && !open_[p]) {  // reads as zero, as a released page does
        open_[p] = true;
        protect(p, p + 1, PROT_READ | PROT_WRITE);
        std::memset(reinterpret_cast<char*>(data_) + p * page_, 0, page_);
      }
      taken += released_[p] && !shared_[p] ? page_ : 0;
    }
    if (taken == 0) return 0;
    budget_.charge(static_cast<int64_t>(taken));  // throws past --memory-limit-mb before anything changes
    for (size_t p = first; p < last;) {  // runs of released pages: accessible again
      if (!released_[p] || shared_[p]) {
        ++p;
        continue;
      }
      size_t q = p;
      while (q < last && released_[q] && !shared_[q]) released_[q++] = false;
      protect(p, q, PROT_READ | PROT_WRITE);
      p = q;
    }
    released_bytes_ -= taken;
    return taken;
  }
  // The pool is a memfd (CpuSharePool): pool page k is mapped (MAP_SHARED | MAP_FIXED) over
  // every page backed by it, a run of pages backed by consecutive pool pages with one mmap.
  // Shared pages stay counted as released; the pool charges the budget for its pages.
  size_t share_granularity() const override { return released_.empty() ? 0 : page_; }
  size_t decommit_unit() const override { return released_.empty() ? 0 : page_; }
  bool shareable(size_t p) const override { return p < released_.size() && released_[p] && !shared_[p]; }
  std::shared_ptr<SharePool> make_share_pool() override { return std::make_shared<CpuSharePool>(budget_, page_); }
  void back(std::span<const size_t> backing, const std::shared_ptr<SharePool>& pool) override {
    auto* mine = dynamic_cast<CpuSharePool*>(pool.get());
    DLPERF_ASSERT(mine != nullptr, "a cpu buffer is backed by a cpu pool");
    const size_t pages = std::min(backing.size(), released_.size());
    const int prot = guard_decommitted() ? PROT_NONE : PROT_READ | PROT_WRITE;  // committed, they open (commit)
    for (size_t p = 0; p < pages;) {
      if (backing[p] == kNotShared) {
        ++p;
        continue;
      }
      size_t q = p + 1;
      while (q < pages && backing[q] != kNotShared && backing[q] == backing[q - 1] + 1) ++q;
      if (::mmap(reinterpret_cast<char*>(data_) + p * page_, (q - p) * page_, prot, MAP_SHARED | MAP_FIXED, mine->fd(),
                 static_cast<off_t>(backing[p] * page_)) == MAP_FAILED)
        throw_library_error("libc", "mmap(MAP_SHARED | MAP_FIXED)", errno_string(), std::source_location::current());
      for (size_t k = p; k < q; ++k) shared_[k] = true, open_[k] = false;
      p = q;
    }
    pools_.push_back(pool);
  }
  void unshare() override {
    for (size_t p = 0; p < shared_.size();) {
      if (!shared_[p]) {
        ++p;
        continue;
      }
      size_t q = p;
      while (q < shared_.size() && shared_[q]) shared_[q++] = false;
      if (::mmap(reinterpret_cast<char*>(data_) + p * page_, (q - p) * page_, guard_decommitted() ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        throw_library_error("libc", "mmap(MAP_ANONYMOUS | MAP_FIXED)", errno_string(), std::source_location::current());
      p = q;
    }
    pools_.clear();
  }

 private:
  void protect(size_t first_page, size_t end_page, int prot) {
    if (!guard_decommitted() || end_page <= first_page) return;
    if (::mprotect(reinterpret_cast<char*>(data_) + first_page * page_, (end_page - first_page) * page_, prot) != 0)
      throw_library_error("libc", "mprotect", errno_string(), std::source_location::current());
  }
  // Whole pages (round_up(n) is a multiple of 64, and an mmap'ed buffer is >= 1 MiB: the last
  // partial page, if any, is left out of the bitmap and always counted).
  static size_t round_up(size_t n) { return ((n * sizeof(float) + 63) / 64) * 64 + 64; }
  int64_t committed_bytes() const { return static_cast<int64_t>(round_up(n_) - released_bytes_); }
  MemoryBudget& budget_;
  size_t n_;
  HostMemory memory_;  // zero-filled
  float* data_;
  size_t page_;
  std::vector<bool> released_;  // per whole page of an mmap'ed buffer: decommitted now; empty otherwise
  size_t released_bytes_;  // decommitted now
  std::vector<bool> shared_;   // per page: backed by the pool (share); counted as released
  std::vector<bool> open_;     // per shared page: committed now (the guard's accessible pages)
  std::vector<std::shared_ptr<SharePool>> pools_;  // those backing shared pages (one, in practice)
};

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

bool has_native_bf16(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : Backend(o), ctx_(std::make_shared<Context>()) {
    ctx_->budget.limit = o.memory_limit_bytes;
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const auto isa = dnnl::get_effective_cpu_isa();
    if (o.precision == Precision::bf16 && !has_native_bf16(isa))
      throw_usage_error(std::string("--precision bf16 needs a CPU with AVX512-BF16 or AMX (this one offers ") + isa_name(isa) +
                        "); use --precision fp32");
    if (o.precision == Precision::fp16 || o.precision == Precision::tf32)
      throw_usage_error(std::string("--precision ") + to_string(o.precision) +
                        " is for the cuda backend; the cpu backend runs fp32 or bf16");
  }

  BackendKind kind() const override { return BackendKind::cpu; }
  std::string isa() const override { return isa_name(dnnl::get_effective_cpu_isa()); }
  std::vector<PlannedKernel> planned_kernels() const override { return ctx_->kernels; }
  // bf16 convolutions: NHWC where AMX runs them (its brgemm kernels want NHWC), blocked
  // nChw16c from the first convolution on otherwise. Measured on an AMD EPYC Zen 5
  // (AVX512-BF16, no AMX), ResNet-50 batch 16, one thread: blocked 1.6 s of CPU per step,
  // NHWC 2.0 s. fp32 is blocked everywhere.
  Layout image_layout() const override {
    return dtype() != DType::f32 && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx ? Layout::channels_last
                                                                                                     : Layout::canonical;
  }
  std::string description() const override {
    const auto* v = dnnl::version();
    std::ostringstream os;
    os << "oneDNN " << v->major << '.' << v->minor << '.' << v->patch << " (" << isa_name(dnnl::get_effective_cpu_isa())
       << "), " << omp_get_max_threads() << (omp_get_max_threads() == 1 ? " thread" : " threads");
    return os.str();
  }

  TensorPtr tensor(const Dims& dims, DType dtype, Layout layout) override {
    if (layout == Layout::channels_last && dims.size() == 4)
      return std::make_unique<CpuTensor>(ctx_, dims, dtype, md(dims, to_dnnl(dtype), tag::nhwc));
    return std::make_unique<CpuTensor>(ctx_, dims, dtype, plain_md(dims, dtype));
  }
  TensorPtr tensor_like(const Tensor& t) override { return std::make_unique<CpuTensor>(ctx_, t.dims(), t.dtype(), cpu(t).desc()); }
  TensorPtr rows_of(Tensor& t, int64_t first, int64_t count) override {
    Dims d = row_view_dims(t, first, count);
    if (cpu(t).desc() != plain_md(t.dims(), t.dtype())) throw_usage_error("rows_of: a tensor " + to_string(t.dims()) + " in a blocked layout");
    const size_t row_bytes = static_cast<size_t>(t.numel() / t.dims()[0]) * dtype_size(t.dtype());
    auto* at = static_cast<std::byte*>(cpu(t).data()) + static_cast<size_t>(first) * row_bytes;
    md desc = plain_md(d, t.dtype());
    return std::make_unique<CpuTensor>(ctx_, std::move(d), t.dtype(), desc, at);
  }
  void convert(const Tensor& src, Tensor& dst) override {
    const auto [src_md, dst_md] = convert_views(src, dst);
    conversion(src_md, dst_md).run(*ctx_, dnnl::memory(src_md, ctx_->engine, cpu(src).data()),
                                   dnnl::memory(dst_md, ctx_->engine, cpu(dst).data()));
    ctx_->stream.wait();
  }
  void plan_convert(const Tensor& src, const Tensor& dst) override {
    const auto [src_md, dst_md] = convert_views(src, dst);
    conversion(src_md, dst_md);
  }
  std::unique_ptr<Buffer> buffer(size_t elems) override { return std::make_unique<CpuBuffer>(ctx_->budget, elems, true); }
  std::unique_ptr<Buffer> decommitted_buffer(size_t elems) override { return std::make_unique<CpuBuffer>(ctx_->budget, elems, false); }
  bool frees_decommitted() const override { return true; }

  // Peak resident set size of this process (VmHWM), the CPU analogue of peak device memory.
  int64_t peak_memory_bytes() const override {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return 0;
  }
  int64_t allocated_peak_bytes() const override { return ctx_->budget.peak; }
  int64_t allocated_bytes() const override { return ctx_->budget.used; }
  void synchronize() override { ctx_->stream.wait(); }

  std::unique_ptr<Conv2d> conv2d(const Conv2dSpec& s, const Tensor& x) override { return make_conv2d(ctx_, s, x); }
  std::unique_ptr<BatchNorm> batch_norm(const BatchNormSpec& s, const Tensor& x) override { return make_batch_norm(ctx_, s, x); }
  std::unique_ptr<Pool2d> pool2d(const Pool2dSpec& s, const Tensor& x) override { return make_pool2d(ctx_, s, x); }
  std::unique_ptr<GlobalAvgPool> global_avg_pool(const Tensor& x) override { return make_global_avg_pool(ctx_, x); }
  std::unique_ptr<Linear> linear(const LinearSpec& s, const Tensor& x) override { return make_linear(ctx_, s, x); }
  std::unique_ptr<Activation> activation(ActivationKind k, const Tensor& x) override { return make_activation(ctx_, k, x); }
  std::unique_ptr<Add> add(const Tensor& a, const Tensor& b, bool fuse_relu) override { return make_add(ctx_, a, b, fuse_relu); }
  std::unique_ptr<SoftmaxCrossEntropy> cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override {
    return make_cross_entropy(ctx_, s, logits);
  }
  std::unique_ptr<LayerNorm> layer_norm(const LayerNormSpec& s, const Tensor& x) override { return make_layer_norm(ctx_, s, x); }
  std::unique_ptr<DropoutAddNorm> dropout_add_norm(const AddNormSpec& s, const Tensor& a) override {
    return make_dropout_add_norm(ctx_, s, a);
  }
  std::unique_ptr<Embedding> embedding(const EmbeddingSpec& s, const Tensor& ids) override { return make_embedding(ctx_, s, ids, dtype()); }
  std::unique_ptr<Dropout> dropout(float p, const Tensor& x) override { return make_dropout(ctx_, p, x); }
  std::unique_ptr<BatchedMatmul> batched_matmul(const BatchedMatmulSpec& s, DType t) override {
    return make_batched_matmul(ctx_, s, t);
  }
  std::unique_ptr<MaskedSoftmax> masked_softmax(const Tensor& x) override { return make_masked_softmax(ctx_, x); }
  std::unique_ptr<RowGather> gather_rows(const Tensor& x, const Tensor& idx) override { return make_gather_rows(ctx_, x, idx); }
  std::unique_ptr<Linear> tied_linear(const LinearSpec& s, Embedding& tied, const Tensor& x) override {
    return make_tied_linear(ctx_, s, tied, x);
  }
  std::unique_ptr<RmsNorm> rms_norm(const RmsNormSpec& s, const Tensor& x) override { return make_rms_norm(ctx_, s, x); }
  std::unique_ptr<Rope> rope(const RopeSpec& s, const Tensor& x) override { return make_rope(ctx_, s, x); }
  std::unique_ptr<SwiGlu> swiglu(const Tensor& a) override { return make_swiglu(ctx_, a); }
  std::unique_ptr<CausalAttention> causal_attention(const AttentionSpec& s, const Tensor& q) override {
    return make_causal_attention(ctx_, s, q);
  }
  std::unique_ptr<SoftmaxCrossEntropy> token_cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override {
    return make_token_cross_entropy(ctx_, s, logits);
  }

  void sgd_step(std::span<float> w, std::span<const float> g, std::span<float> m, const SgdStep& s) override {
    DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size(), "sgd ranges of one size");
    const Gate gate(s.gate);
    if (gate.skip) return;
    float* __restrict wp = w.data();
    const float* __restrict gp = g.data();
    float* __restrict mp = m.data();
    const int64_t n = static_cast<int64_t>(w.size());
    const float lr = s.lr * gate.lr, mu = s.momentum, wd = s.weight_decay, scale = s.grad_scale * gate.grad_scale;
    if (s.first_step) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float d = gp[i] * scale + wd * wp[i];
        mp[i] = d;
        wp[i] -= lr * d;
      }
    } else {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float d = gp[i] * scale + wd * wp[i];
        const float v = mu * mp[i] + d;
        mp[i] = v;
        wp[i] -= lr * v;
      }
    }
  }

  // Adam-family kernels (see AdamStep in backend.h): one pass over the range each, f32 state.
  // The multi-tensor forms (Backend::adamw_step / lamb_step over segments) are the defaults:
  // on the CPU a loop over tensors costs no synchronisation.
  using Backend::adamw_step;
  using Backend::sgd_step;
  void adamw_step(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                  const AdamStep& s) override {
    DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size() && w.size() == v.size(), "adamw ranges of one size");
    const Gate gate(s.gate);
    if (gate.skip) return;
    const Moments k(s, gate);
    float* __restrict wp = w.data();
    const float* __restrict gp = g.data();
    float* __restrict mp = m.data();
    float* __restrict vp = v.data();
    const float lr = s.lr * gate.lr, wd = s.weight_decay;
    const int64_t n = static_cast<int64_t>(w.size());
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) wp[i] -= lr * (k.update(gp[i], mp[i], vp[i]) + wd * wp[i]);
  }

  LambNorms lamb_update(std::span<const float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                        std::span<float> update, const AdamStep& s) override {
    DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size() && w.size() == v.size() && w.size() == update.size(),
                  "lamb ranges of one size");
    const Gate gate(s.gate);
    if (gate.skip) return {};
    const Moments k(s, gate);
    const float* __restrict wp = w.data();
    const float* __restrict gp = g.data();
    float* __restrict mp = m.data();
    float* __restrict vp = v.data();
    float* __restrict up = update.data();
    const float wd = s.weight_decay;
    const int64_t n = static_cast<int64_t>(w.size());
    double w_sq = 0.0, u_sq = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : w_sq, u_sq)
    for (int64_t i = 0; i < n; ++i) {
      const float u = k.update(gp[i], mp[i], vp[i]) + wd * wp[i];
      up[i] = u;
      w_sq += static_cast<double>(wp[i]) * wp[i];
      u_sq += static_cast<double>(u) * u;
    }
    return {w_sq, u_sq};
  }

  void lamb_apply(std::span<float> w, std::span<const float> update, float step_size, const float* gate_ptr) override {
    DLPERF_ASSERT(w.size() == update.size(), "lamb ranges of one size");
    const Gate gate(gate_ptr);
    if (gate.skip) return;
    const float step = step_size * gate.lr;
    float* __restrict wp = w.data();
    const float* __restrict up = update.data();
    const int64_t n = static_cast<int64_t>(w.size());
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) wp[i] -= step * up[i];
  }

  std::unique_ptr<StepRecorder> step_recorder() override { return make_step_recorder(ctx_); }
  void fill(float* dst, size_t count, float value) override { std::fill(dst, dst + count, value); }
  void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) override {
    onednn::update_step_gate(grads, gate, u);
  }

  double sum_squares(std::span<const float> x) override {
    const float* __restrict p = x.data();
    const int64_t n = static_cast<int64_t>(x.size());
    double sum = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(p[i]) * p[i];
    return sum;
  }

  void accumulate(std::span<float> dst, std::span<const float> src, bool first) override {
    DLPERF_ASSERT(dst.size() == src.size(), "accumulate ranges of one size");
    float* __restrict d = dst.data();
    const float* __restrict s = src.data();
    const int64_t n = static_cast<int64_t>(dst.size());
    if (first) {
      std::copy(s, s + n, d);
      return;
    }
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  }

 private:
  // The step gate as these host loops see it (backend/step_gate.h): the CPU backend's gate is
  // host memory and every op has finished, so it is read directly.
  struct Gate {
    explicit Gate(const float* g)
        : skip(g && g[gate_index(GateField::skip)] != 0.0f),
          grad_scale(g ? g[gate_index(GateField::grad_scale)] : 1.0f),
          lr(g ? g[gate_index(GateField::lr)] : 1.0f),
          applied(g ? static_cast<int64_t>(g[gate_index(GateField::applied)]) : 0) {}
    bool skip;
    float grad_scale, lr;
    int64_t applied;  // 0 without a gate
  };

  // Adam's moment update and bias-corrected step direction for one element; with a gate the
  // bias correction counts the steps applied (a skipped step does not count).
  struct Moments {
    Moments(const AdamStep& s, const Gate& g)
        : b1(s.beta1), b2(s.beta2), eps(s.eps), scale(s.grad_scale * g.grad_scale),
          c1(1.0f / (1.0f - std::pow(s.beta1, static_cast<float>(s.gate ? g.applied : s.step)))),
          c2(1.0f / (1.0f - std::pow(s.beta2, static_cast<float>(s.gate ? g.applied : s.step)))) {}
    float update(float grad, float& m, float& v) const {
      const float gs = grad * scale;
      m = b1 * m + (1.0f - b1) * gs;
      v = b2 * v + (1.0f - b2) * gs * gs;
      return (m * c1) / (std::sqrt(v * c2) + eps);
    }
    float b1, b2, eps, scale, c1, c2;
  };

  // The two sides of a convert as one reorder sees them. Same dims: the tensors themselves. A
  // reshape: the canonical side viewed with the other side's dims (same bytes), so one reorder
  // moves the data in canonical order (VGG's flatten of a blocked map).
  std::pair<md, md> convert_views(const Tensor& src, const Tensor& dst) const {
    const CpuTensor &s = cpu(src), &d = cpu(dst);
    if (src.dims() == dst.dims()) return {s.desc(), d.desc()};
    DLPERF_ASSERT(src.numel() == dst.numel(), "convert " + to_string(src.dims()) + " -> " + to_string(dst.dims()) + " keeps the element count");
    if (d.desc() == plain_md(d.dims(), d.dtype())) return {s.desc(), plain_md(s.dims(), d.dtype())};
    DLPERF_ASSERT(s.desc() == plain_md(s.dims(), s.dtype()), "a reshaping convert needs one canonical side");
    return {plain_md(d.dims(), s.dtype()), d.desc()};
  }
  // The reorder between two descriptors, planned (and recorded) on first use; models plan
  // theirs with plan_convert before the timed loop.
  const PlannedReorder& conversion(const md& src, const md& dst) {
    for (const auto& c : conversions_)
      if (c.src == src && c.dst == dst) return c.reorder;
    conversions_.push_back({src, dst, PlannedReorder(*ctx_, src, dst, "convert")});
    return conversions_.back().reorder;
  }

  struct Conversion {
    md src, dst;
    PlannedReorder reorder;
  };
  Ctx ctx_;
  std::deque<Conversion> conversions_;  // deque: references stay valid as it grows
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& o) { return std::make_unique<CpuBackend>(o); }

}  // namespace dlperf::onednn

bool dlperf::cpu_computes_bf16() { return onednn::has_native_bf16(dnnl::get_effective_cpu_isa()); }
