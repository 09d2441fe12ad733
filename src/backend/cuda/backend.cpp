// CudaBackend: device selection and checks, tensor and buffer allocation on the compute
// stream, the fused SGD / AdamW / LAMB updates (kernels in optimizer.cu), and the op
// factories (one file per op beside this one).
#include "backend/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "backend/cuda/mapped_buffer.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

// A flat f32 buffer (parameters, gradients, momentum) in device memory.
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(Ctx ctx, size_t n) : ctx_(std::move(ctx)), n_(n), mem_(ctx_->alloc(n * sizeof(float))) { zero(); }
  float* data() override { return mem_.as<float>(); }
  size_t size() const override { return n_; }
  void read(std::span<float> out, size_t offset) const override {
    DLPERF_ASSERT(offset + out.size() <= n_, "buffer read in range");
    DLPERF_CHECK(cudaMemcpyAsync(out.data(), mem_.as<float>() + offset, out.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();
  }
  void write(std::span<const float> in, size_t offset) override {
    DLPERF_ASSERT(offset + in.size() <= n_, "buffer write in range");
    DLPERF_CHECK(cudaMemcpyAsync(mem_.as<float>() + offset, in.data(), in.size_bytes(), cudaMemcpyHostToDevice, ctx_->s()));
    ctx_->sync();
  }
  void zero() override { DLPERF_CHECK(cudaMemsetAsync(mem_.get(), 0, mem_.bytes(), ctx_->s())); }

 private:
  Ctx ctx_;
  size_t n_;
  DeviceMemory mem_;
};

Ctx make_context(const BackendOptions& o) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw_usage_error(std::string("--backend cuda: no CUDA device is usable here (") +
                      (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + "); use --backend cpu");
  }
  if (o.device < 0) throw_usage_error("CUDA device " + std::to_string(o.device) + " is negative");
  // The local rank modulo the devices this process sees: one rank per GPU on a node that shows
  // all GPUs, or the one GPU Slurm's --gpus-per-task shows each rank (dlperf-train refuses two
  // ranks on one GPU before this: shared_gpu, comm/mpi_session.h).
  auto ctx = std::make_shared<Context>(o.device % count, o.precision, o.conv_autotune, o.deterministic);
  ctx->batch_norm = o.cuda_batch_norm;
  ctx->attention = o.cuda_attention;
  // bf16 tensor cores and cuDNN's bf16 kernels start with Ampere (sm_80).
  if (o.precision == Precision::bf16 && ctx->props.major < 8)
    throw_usage_error(std::string("--precision bf16 needs an Ampere or newer GPU (") + ctx->props.name + " is sm_" +
                      std::to_string(ctx->props.major) + std::to_string(ctx->props.minor) + "); use --precision fp16");
  if (o.precision == Precision::tf32 && ctx->props.major < 8)
    throw_usage_error(std::string("--precision tf32 needs an Ampere or newer GPU (") + ctx->props.name + " is sm_" +
                      std::to_string(ctx->props.major) + std::to_string(ctx->props.minor) + "); use --precision fp32");
  return ctx;
}

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& o)
    : Backend(o), ctx_(make_context(o)), mapped_(mapped_buffers_supported(*ctx_)),
      mapping_(make_mapping_queue(std::chrono::seconds(o.timeout_s))) {
  // The reduction scratch of lamb_update and sum_squares, owned through the context's counter.
  auto mem = std::make_shared<DeviceMemory>(ctx_->alloc(static_cast<size_t>(2 * kReduceBlocks + 2) * sizeof(double)));
  reduce_ = std::shared_ptr<void>(mem, mem->get());
}
CudaBackend::~CudaBackend() = default;

cudaStream_t CudaBackend::stream() const { return ctx_->s(); }
int CudaBackend::device() const { return ctx_->device; }

std::string CudaBackend::description() const {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  const size_t cudnn = cudnnGetVersion();
  std::ostringstream os;
  os << "CUDA " << runtime / 1000 << '.' << (runtime % 1000) / 10 << ", cuDNN " << cudnn / 10000 << '.' << (cudnn % 10000) / 100
     << '.' << cudnn % 100 << " (" << ctx_->props.name << ", sm_" << ctx_->props.major << ctx_->props.minor << ", device "
     << ctx_->device << ")";
  return os.str();
}

TensorPtr CudaBackend::tensor(const Dims& dims, DType dtype, Layout layout) {
  return std::make_unique<CudaTensor>(ctx_, dims, dtype, layout);
}
TensorPtr CudaBackend::tensor_like(const Tensor& t) {
  return std::make_unique<CudaTensor>(ctx_, t.dims(), t.dtype(), dev(t).layout(), dev(t).padded() ? dev(t).pitch() : 0);
}

TensorPtr CudaBackend::rows_of(Tensor& t, int64_t first, int64_t count) {
  Dims d = row_view_dims(t, first, count);
  if (dev(t).padded() || (t.dims().size() == 4 && dev(t).nhwc()))
    throw_usage_error("rows_of: a tensor " + to_string(t.dims()) + " with a row pitch or in channels-last layout");
  const size_t row_bytes = static_cast<size_t>(t.numel() / t.dims()[0]) * dtype_size(t.dtype());
  return std::make_unique<CudaTensor>(ctx_, std::move(d), t.dtype(), dev(t).as<std::byte>() + static_cast<size_t>(first) * row_bytes);
}

void CudaBackend::convert(const Tensor& src, Tensor& dst) {
  DLPERF_ASSERT(!dev(src).padded() && !dev(dst).padded(), "convert of dense tensors (a padded one is read or written instead)");
  if (src.dims() == dst.dims()) {
    cuda::convert(*ctx_, dev(src).data(), src.dtype(), dev(src).nhwc(), dev(dst).data(), dst.dtype(), dev(dst).nhwc(), src.dims());
    return;
  }
  // A reshape (Backend::convert's contract): one side is canonical, so its bytes are the
  // other side's dims in row-major order; convert with the non-canonical side's dims.
  DLPERF_ASSERT(src.numel() == dst.numel(), "convert " + to_string(src.dims()) + " -> " + to_string(dst.dims()) + " keeps the element count");
  DLPERF_ASSERT(!dev(src).nhwc() || !dev(dst).nhwc(), "a reshaping convert needs one canonical side");
  const Dims& d = dev(src).nhwc() ? src.dims() : dst.dims().size() > src.dims().size() ? dst.dims() : src.dims();
  cuda::convert(*ctx_, dev(src).data(), src.dtype(), dev(src).nhwc(), dev(dst).data(), dst.dtype(), dev(dst).nhwc(), d);
}

std::unique_ptr<Buffer> CudaBackend::buffer(size_t elems) { return std::make_unique<CudaBuffer>(ctx_, elems); }
std::string CudaBackend::memory_mapping_summary(int64_t measured_steps) const {
  return mapping_summary(mapping_stats(), window_start_, window_started_ ? measured_steps : 0);
}
void CudaBackend::begin_measured_window() {
  window_start_ = mapping_stats();
  window_started_ = true;
  // A profiler started with collection off (`ncu --profile-from-start off`) collects from the
  // first measured step: set-up, plan-time trials and warm-up stay out of its per-kernel summary.
  // Without a profiler attached this does nothing; an error from it is not the run's.
  if (cudaProfilerStart() != cudaSuccess) (void)cudaGetLastError();
}

std::unique_ptr<Buffer> CudaBackend::decommitted_buffer(size_t elems) {
  return mapped_ ? make_mapped_buffer(ctx_, mapping_, elems, false) : buffer(elems);
}
std::unique_ptr<Buffer> CudaBackend::releasable_buffer(size_t elems) {
  return mapped_ ? make_mapped_buffer(ctx_, mapping_, elems, true) : buffer(elems);
}

int64_t CudaBackend::device_memory_used_bytes() const {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(total - free_bytes);
}

DeviceFacts CudaBackend::device_facts() const { return describe_device(*ctx_); }

std::unique_ptr<StepRecorder> CudaBackend::step_recorder() { return make_step_recorder(ctx_); }
std::unique_ptr<InputPipe> CudaBackend::input_pipe(std::span<Tensor* const> model_inputs) {
  return make_input_pipe(ctx_, model_inputs);
}
size_t CudaBackend::input_pipe_bytes(std::span<Tensor* const> model_inputs) const {
  size_t bytes = 0;  // input_pipe.cpp: one device copy of every input, in its canonical layout
  for (const Tensor* t : model_inputs) bytes += t->storage_bytes();
  return bytes;
}

void CudaBackend::fill(float* dst, size_t count, float value) {
  DLPERF_CHECK(launch_fill(dst, ElemType::f32, static_cast<int64_t>(count), value, ctx_->s()));
}

void CudaBackend::update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) {
  const bool need_sum = u.check_finite || u.clip_norm > 0.0f;
  auto* partial = static_cast<double*>(reduce_.get());
  double* sums = partial + 2 * kReduceBlocks;
  if (need_sum && !u.sq_sum)
    DLPERF_CHECK(launch_sum_squares(grads.data(), static_cast<int64_t>(grads.size()), partial, sums, ctx_->s()));
  const GateUpdateParams p{u.check_finite ? 1 : 0, u.growth_interval, u.clip_norm, u.grad_scale};
  DLPERF_CHECK(launch_gate_update(need_sum ? (u.sq_sum ? u.sq_sum : sums) : nullptr, gate, p, ctx_->s()));
}

namespace {
// One captured graph, instantiated: launched on the compute stream.
class CudaGraphSegment final : public GraphSegment {
 public:
  CudaGraphSegment(cudaGraphExec_t exec, cudaStream_t s) : exec_(exec), s_(s) {}
  ~CudaGraphSegment() override { cudaGraphExecDestroy(exec_); }
  CudaGraphSegment(const CudaGraphSegment&) = delete;
  CudaGraphSegment& operator=(const CudaGraphSegment&) = delete;
  void launch() override { DLPERF_CHECK(cudaGraphLaunch(exec_, s_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t s_;
};
}  // namespace

// Thread-local capture mode: only this thread's calls are checked for capture safety, so the
// MPI progress, heartbeat and trace-writer threads (no CUDA calls) never trip it.
void CudaBackend::begin_capture() { DLPERF_CHECK(cudaStreamBeginCapture(ctx_->s(), cudaStreamCaptureModeThreadLocal)); }

std::unique_ptr<GraphSegment> CudaBackend::end_capture() {
  cudaGraph_t graph = nullptr;
  DLPERF_CHECK(cudaStreamEndCapture(ctx_->s(), &graph));
  size_t nodes = 0;
  const cudaError_t e = cudaGraphGetNodes(graph, nullptr, &nodes);
  if (e != cudaSuccess || nodes == 0) {  // nothing queued between two host actions
    cudaGraphDestroy(graph);
    DLPERF_CHECK(e);
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph is independent of it
  DLPERF_CHECK(ie);
  return std::make_unique<CudaGraphSegment>(exec, ctx_->s());
}

HostMemory CudaBackend::host_memory(size_t bytes) {
  void* p = nullptr;
  DLPERF_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  return HostMemory(p, [](void* q) { (void)cudaFreeHost(q); });
}
std::vector<PlannedKernel> CudaBackend::planned_kernels() const { return ctx_->kernels; }
std::string CudaBackend::isa() const { return "sm_" + std::to_string(ctx_->props.major * 10 + ctx_->props.minor); }

// The high-water mark of the backend's own allocations (tensors, buffers, parameter copies,
// workspaces); cuDNN's and cuBLAS's internal allocations are not included.
int64_t CudaBackend::peak_memory_bytes() const { return ctx_->memory.peak.load(); }
int64_t CudaBackend::allocated_bytes() const { return ctx_->memory.current.load(); }
void CudaBackend::synchronize() { ctx_->sync(); }

std::unique_ptr<Conv2d> CudaBackend::conv2d(const Conv2dSpec& s, const Tensor& x) { return make_conv2d(ctx_, s, x); }
std::unique_ptr<BatchNorm> CudaBackend::batch_norm(const BatchNormSpec& s, const Tensor& x) { return make_batch_norm(ctx_, s, x); }
// The ops below run one library call or one of dlperf's kernels each way; recorded by kind.
void CudaBackend::record(const char* kind, const Tensor& x, const std::string& impl) {
  for (const char* pass : {"forward", "backward"}) ctx_->record_kernel(kind, pass, shape_str(x.dims(), x.dtype(), dev(x).nhwc()), impl);
}

std::unique_ptr<Pool2d> CudaBackend::pool2d(const Pool2dSpec& s, const Tensor& x) {
  record(s.kind == PoolKind::max ? "max_pool" : "avg_pool", x, "cudnn pooling");
  return make_pool2d(ctx_, s, x);
}
std::unique_ptr<GlobalAvgPool> CudaBackend::global_avg_pool(const Tensor& x) {
  record("global_avg_pool", x, "cudnn pooling");
  return make_global_avg_pool(ctx_, x);
}
std::unique_ptr<Linear> CudaBackend::linear(const LinearSpec& s, const Tensor& x) { return make_linear(ctx_, s, x); }
std::unique_ptr<Activation> CudaBackend::activation(ActivationKind k, const Tensor& x) {
  record(k == ActivationKind::relu ? "relu" : k == ActivationKind::gelu ? "gelu" : "tanh", x, "dlperf:eltwise");
  return make_activation(ctx_, k, x);
}
std::unique_ptr<Add> CudaBackend::add(const Tensor& a, const Tensor& b, bool fuse_relu) {
  record(fuse_relu ? "add_relu" : "add", a, "dlperf:eltwise");
  return make_add(ctx_, a, b, fuse_relu);
}
std::unique_ptr<SoftmaxCrossEntropy> CudaBackend::cross_entropy(const CrossEntropySpec& s, const Tensor& logits) {
  record("cross_entropy", logits, "dlperf:cross_entropy");
  return make_cross_entropy(ctx_, s, logits);
}
std::unique_ptr<LayerNorm> CudaBackend::layer_norm(const LayerNormSpec& s, const Tensor& x) { return make_layer_norm(ctx_, s, x); }
std::unique_ptr<DropoutAddNorm> CudaBackend::dropout_add_norm(const AddNormSpec& s, const Tensor& a) {
  return make_dropout_add_norm(ctx_, s, a);
}
std::unique_ptr<RmsNorm> CudaBackend::rms_norm(const RmsNormSpec& s, const Tensor& x) { return make_rms_norm(ctx_, s, x); }
std::unique_ptr<Rope> CudaBackend::rope(const RopeSpec& s, const Tensor& x) { return make_rope(ctx_, s, x); }
std::unique_ptr<SwiGlu> CudaBackend::swiglu(const Tensor& a) { return make_swiglu(ctx_, a); }
std::unique_ptr<CausalAttention> CudaBackend::causal_attention(const AttentionSpec& s, const Tensor& q) {
  return make_causal_attention(ctx_, s, q);
}
std::unique_ptr<SoftmaxCrossEntropy> CudaBackend::token_cross_entropy(const CrossEntropySpec& s, const Tensor& logits) {
  return make_token_cross_entropy(ctx_, s, logits);
}
std::unique_ptr<Embedding> CudaBackend::embedding(const EmbeddingSpec& s, const Tensor& ids) {
  ctx_->record_kernel(s.name, "forward", shape_str(ids.dims(), ids.dtype()) + " -> " + std::to_string(s.features), "dlperf:gather");
  ctx_->record_kernel(s.name, "backward", shape_str(ids.dims(), ids.dtype()) + " -> " + std::to_string(s.features),
                      "dlperf:sorted_scatter (cub radix sort)");
  return make_embedding(ctx_, s, ids, dtype());
}
std::unique_ptr<Dropout> CudaBackend::dropout(float p, const Tensor& x) {
  record("dropout", x, "dlperf:dropout");
  return make_dropout(ctx_, p, x);
}
std::unique_ptr<BatchedMatmul> CudaBackend::batched_matmul(const BatchedMatmulSpec& s, DType t) {
  return make_batched_matmul(ctx_, s, t);
}
std::unique_ptr<MaskedSoftmax> CudaBackend::masked_softmax(const Tensor& x) {
  record("masked_softmax", x, "dlperf:masked_softmax");
  return make_masked_softmax(ctx_, x);
}

void CudaBackend::accumulate(std::span<float> dst, std::span<const float> src, bool first) {
  DLPERF_ASSERT(dst.size() == src.size(), "accumulate ranges of one size");
  DLPERF_CHECK(launch_accumulate(dst.data(), src.data(), static_cast<int64_t>(dst.size()), first, ctx_->s()));
}

void CudaBackend::sgd_step(std::span<float> w, std::span<const float> g, std::span<float> m, const SgdStep& s) {
  DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size(), "sgd ranges of one size");
  DLPERF_CHECK(launch_sgd(w.data(), g.data(), m.data(), static_cast<int64_t>(w.size()), s.lr, s.momentum, s.weight_decay,
                          s.grad_scale, s.first_step, s.gate, ctx_->s()));
}

std::unique_ptr<RowGather> CudaBackend::gather_rows(const Tensor& x, const Tensor& idx) {
  record("gather_rows", x, "dlperf:gather / sorted_scatter");
  return make_gather_rows(ctx_, x, idx);
}
std::unique_ptr<Linear> CudaBackend::tied_linear(const LinearSpec& s, Embedding& tied, const Tensor& x) {
  return make_tied_linear(ctx_, s, tied, x);
}

namespace {
AdamParams adam_params(const AdamStep& s) {
  const auto t = static_cast<double>(s.step);
  return {s.lr,
          s.beta1,
          s.beta2,
          s.eps,
          s.weight_decay,
          s.grad_scale,
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(s.beta1), t))),
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(s.beta2), t)))};
}
}  // namespace

void CudaBackend::adamw_step(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v, const AdamStep& s) {
  DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size() && w.size() == v.size(), "adamw ranges of one size");
  DLPERF_CHECK(launch_adamw(w.data(), g.data(), m.data(), v.data(), static_cast<int64_t>(w.size()), adam_params(s), s.gate, ctx_->s()));
}

LambNorms CudaBackend::lamb_update(std::span<const float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                                   std::span<float> update, const AdamStep& s) {
  DLPERF_ASSERT(w.size() == g.size() && w.size() == m.size() && w.size() == v.size() && w.size() == update.size(),
                "lamb ranges of one size");
  auto* partial = static_cast<double*>(reduce_.get());
  double* sums = partial + 2 * kReduceBlocks;
  DLPERF_CHECK(launch_lamb_update(w.data(), g.data(), m.data(), v.data(), update.data(), static_cast<int64_t>(w.size()), adam_params(s),
                                  s.gate, partial, sums, ctx_->s()));
  double host[2] = {0.0, 0.0};
  DLPERF_CHECK(cudaMemcpyAsync(host, sums, sizeof host, cudaMemcpyDeviceToHost, ctx_->s()));
  ctx_->sync();
  return {host[0], host[1]};
}

void CudaBackend::lamb_apply(std::span<float> w, std::span<const float> update, float step, const float* gate) {
  DLPERF_ASSERT(w.size() == update.size(), "lamb ranges of one size");
  DLPERF_CHECK(launch_axpy(w.data(), update.data(), static_cast<int64_t>(w.size()), step, gate, ctx_->s()));
}

CudaBackend::OptTable& CudaBackend::opt_table(std::span<const ParamSegment> segments) {
  const auto piece = [&](size_t i) { return LambPiece{segments[i].offset, segments[i].offset, segments[i].count, i, segments[i].decay}; };
  for (auto& t : opt_tables_) {
    bool same = t.key.size() == segments.size();
    for (size_t i = 0; same && i < segments.size(); ++i) same = t.key[i] == piece(i);
    if (same) return t;
  }
  std::vector<LambPiece> pieces(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) pieces[i] = piece(i);
  return opt_table(std::span<const LambPiece>(pieces));
}

CudaBackend::OptTable& CudaBackend::opt_table(std::span<const LambPiece> pieces) {
  for (auto& t : opt_tables_)
    if (std::equal(pieces.begin(), pieces.end(), t.key.begin(), t.key.end())) return t;
  std::vector<OptSegment> segs;
  std::vector<OptTask> tasks;
  for (const LambPiece& p : pieces) {
    OptSegment g;
    g.offset = static_cast<int64_t>(p.local);
    g.count = static_cast<int64_t>(p.count);
    g.w_shift = static_cast<int64_t>(p.offset) - static_cast<int64_t>(p.local);
    g.param = static_cast<int64_t>(p.param);
    g.decay = p.decay;
    g.first_task = static_cast<int64_t>(tasks.size());
    for (int64_t b = 0; b < g.count; b += kOptTaskElems)
      tasks.push_back({static_cast<int64_t>(segs.size()), g.offset + b, g.offset + std::min(g.count, b + kOptTaskElems)});
    g.tasks = static_cast<int64_t>(tasks.size()) - g.first_task;
    segs.push_back(g);
  }
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  OptTable t;
  t.key.assign(pieces.begin(), pieces.end());
  t.segments = static_cast<int64_t>(segs.size());
  t.tasks = static_cast<int64_t>(tasks.size());
  t.tasks_at = up(segs.size() * sizeof(OptSegment));
  t.partial_at = t.tasks_at + up(tasks.size() * sizeof(OptTask));
  t.ratio_at = t.partial_at + up(2 * tasks.size() * sizeof(double));
  auto mem = std::make_shared<DeviceMemory>(ctx_->alloc(t.ratio_at + up(segs.size() * sizeof(float)) + 256));
  auto* base = static_cast<char*>(mem->get());
  DLPERF_CHECK(cudaMemcpyAsync(base, segs.data(), segs.size() * sizeof(OptSegment), cudaMemcpyHostToDevice, ctx_->s()));
  DLPERF_CHECK(cudaMemcpyAsync(base + t.tasks_at, tasks.data(), tasks.size() * sizeof(OptTask), cudaMemcpyHostToDevice, ctx_->s()));
  ctx_->sync();  // the host vectors go out of scope (the first step only)
  t.mem = std::shared_ptr<void>(mem, mem->get());
  opt_tables_.push_back(std::move(t));
  return opt_tables_.back();
}

void CudaBackend::sgd_step(float* w, const float* g, float* m, std::span<const ParamSegment> segments, const SgdStep& s) {
  OptTable& t = opt_table(segments);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_sgd_multi(w, g, m, reinterpret_cast<const OptSegment*>(base), reinterpret_cast<const OptTask*>(base + t.tasks_at), t.tasks,
                                s.lr, s.momentum, s.weight_decay, s.grad_scale, s.first_step, s.gate, ctx_->s()));
}

void CudaBackend::adamw_step(float* w, const float* g, float* m, float* v, std::span<const ParamSegment> segments, const AdamStep& s) {
  OptTable& t = opt_table(segments);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_adamw_multi(w, g, m, v, reinterpret_cast<const OptSegment*>(base), reinterpret_cast<const OptTask*>(base + t.tasks_at),
                                  t.tasks, adam_params(s), s.gate, ctx_->s()));
}

void CudaBackend::lamb_step(float* w, const float* g, float* m, float* v, float* update, std::span<const ParamSegment> segments,
                            const AdamStep& s) {
  OptTable& t = opt_table(segments);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_lamb_multi(w, g, m, v, update, reinterpret_cast<const OptSegment*>(base), t.segments,
                                 reinterpret_cast<const OptTask*>(base + t.tasks_at), t.tasks, adam_params(s), s.gate,
                                 reinterpret_cast<double*>(base + t.partial_at), reinterpret_cast<float*>(base + t.ratio_at), ctx_->s()));
}

void CudaBackend::lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, std::span<const LambPiece> pieces,
                                   size_t params, const AdamStep& s, double* sums) {
  OptTable& t = opt_table(pieces);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_lamb_shard_norms(w, g, m, v, update, reinterpret_cast<const OptSegment*>(base), t.segments,
                                       reinterpret_cast<const OptTask*>(base + t.tasks_at), t.tasks, static_cast<int64_t>(params),
                                       adam_params(s), s.gate, reinterpret_cast<double*>(base + t.partial_at), sums, ctx_->s()));
}

void CudaBackend::lamb_shard_apply(float* w, const float* update, std::span<const LambPiece> pieces, const double* sums, const AdamStep& s) {
  OptTable& t = opt_table(pieces);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_lamb_shard_apply(w, update, reinterpret_cast<const OptSegment*>(base), t.segments,
                                       reinterpret_cast<const OptTask*>(base + t.tasks_at), t.tasks, sums,
                                       reinterpret_cast<float*>(base + t.ratio_at), s.lr, s.gate, ctx_->s()));
}

double CudaBackend::sum_squares(std::span<const float> x) {
  auto* partial = static_cast<double*>(reduce_.get());
  double* sums = partial + 2 * kReduceBlocks;
  DLPERF_CHECK(launch_sum_squares(x.data(), static_cast<int64_t>(x.size()), partial, sums, ctx_->s()));
  double host = 0.0;
  DLPERF_CHECK(cudaMemcpyAsync(&host, sums, sizeof host, cudaMemcpyDeviceToHost, ctx_->s()));
  ctx_->sync();
  return host;
}

void CudaBackend::refresh_compute_weights(std::span<Layer* const> layers) {
  // The segment list is rebuilt on the host each call (a few hundred entries) and its table
  // uploaded the first time the list is seen: every step passes the same lists (the whole
  // model, or ZeRO's one per bucket), so the upload and its synchronisation happen once each.
  std::vector<CastSegment> segments;
  for (Layer* l : layers) {
    const auto* owner = dynamic_cast<const ParamOwner*>(l);
    DLPERF_ASSERT(owner != nullptr, "every CUDA layer with parameters owns cuda::Params");
    for (const Param& p : owner->cuda_params()) {
      CastSegment g;
      if (p.cast_segment(g)) segments.push_back(g);
    }
  }
  const auto same = [](const CastSegment& a, const CastSegment& b) {
    return a.src == b.src && a.dst == b.dst && a.n == b.n && a.c == b.c && a.hw == b.hw && a.type == b.type && a.krsc == b.krsc;
  };
  if (segments.empty()) return;
  auto table = std::find_if(cast_tables_.begin(), cast_tables_.end(), [&](const CastTable& t) {
    return std::equal(segments.begin(), segments.end(), t.key.begin(), t.key.end(), same);
  });
  if (table == cast_tables_.end()) {
    std::vector<CastTask> tasks;
    for (size_t k = 0; k < segments.size(); ++k) {
      const int64_t count = segments[k].n * segments[k].c * segments[k].hw;
      for (int64_t b = 0; b < count; b += kCastTaskElems) tasks.push_back({static_cast<int64_t>(k), b, std::min(count, b + kCastTaskElems)});
    }
    const size_t seg_bytes = (segments.size() * sizeof(CastSegment) + 255) / 256 * 256;
    auto mem = std::make_shared<DeviceMemory>(ctx_->alloc(std::max<size_t>(seg_bytes + tasks.size() * sizeof(CastTask), 1)));
    DLPERF_CHECK(cudaMemcpyAsync(mem->get(), segments.data(), segments.size() * sizeof(CastSegment), cudaMemcpyHostToDevice, ctx_->s()));
    DLPERF_CHECK(cudaMemcpyAsync(static_cast<char*>(mem->get()) + seg_bytes, tasks.data(), tasks.size() * sizeof(CastTask),
                                 cudaMemcpyHostToDevice, ctx_->s()));
    ctx_->sync();  // the host vectors go out of scope
    table = cast_tables_.insert(cast_tables_.end(), {std::move(segments), std::shared_ptr<void>(mem, mem->get()),
                                                     static_cast<int64_t>(tasks.size()), seg_bytes});
  }
  auto* base = static_cast<char*>(table->mem.get());
  DLPERF_CHECK(launch_cast_segments(reinterpret_cast<const CastSegment*>(base), reinterpret_cast<const CastTask*>(base + table->segments_bytes),
                                    table->tasks, ctx_->s()));
}

namespace {
struct DevicePackTable final : Backend::PackTable {
  std::shared_ptr<void> mem;  // PackRunEntry[runs] | PackTask[tasks]
  size_t tasks_at = 0;
  int64_t tasks = 0;
};
}  // namespace

std::unique_ptr<Backend::PackTable> CudaBackend::pack_table(std::vector<PackRun> runs) {
  std::vector<PackRunEntry> entries;
  std::vector<PackTask> tasks;
  for (const PackRun& r : runs) {
    const auto k = static_cast<int64_t>(entries.size());
    entries.push_back({static_cast<int64_t>(r.value), static_cast<int64_t>(r.count), static_cast<int64_t>(r.word), r.narrow ? 1 : 0});
    const auto count = static_cast<int64_t>(r.count);
    for (int64_t b = 0; b < count; b += kCastTaskElems) tasks.push_back({k, b, std::min(count, b + kCastTaskElems)});
  }
  auto t = std::make_unique<DevicePackTable>();
  t->tasks_at = (entries.size() * sizeof(PackRunEntry) + 255) / 256 * 256;
  t->tasks = static_cast<int64_t>(tasks.size());
  auto mem = std::make_shared<DeviceMemory>(ctx_->alloc(std::max<size_t>(t->tasks_at + tasks.size() * sizeof(PackTask), 1)));
  DLPERF_CHECK(cudaMemcpyAsync(mem->get(), entries.data(), entries.size() * sizeof(PackRunEntry), cudaMemcpyHostToDevice, ctx_->s()));
  DLPERF_CHECK(cudaMemcpyAsync(static_cast<char*>(mem->get()) + t->tasks_at, tasks.data(), tasks.size() * sizeof(PackTask),
                               cudaMemcpyHostToDevice, ctx_->s()));
  ctx_->sync();  // the host vectors go out of scope
  t->mem = std::shared_ptr<void>(mem, mem->get());
  return t;
}

void CudaBackend::pack(const PackTable& table, const float* values, float* words) {
  const auto& t = static_cast<const DevicePackTable&>(table);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_pack_runs(reinterpret_cast<const PackRunEntry*>(base), reinterpret_cast<const PackTask*>(base + t.tasks_at), t.tasks,
                                elem(dtype()), const_cast<float*>(values), words, false, ctx_->s()));
}

void CudaBackend::unpack(const PackTable& table, const float* words, float* values) {
  const auto& t = static_cast<const DevicePackTable&>(table);
  auto* base = static_cast<char*>(t.mem.get());
  DLPERF_CHECK(launch_pack_runs(reinterpret_cast<const PackRunEntry*>(base), reinterpret_cast<const PackTask*>(base + t.tasks_at), t.tasks,
                                elem(dtype()), values, const_cast<float*>(words), true, ctx_->s()));
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o) { return std::make_unique<CudaBackend>(o); }

}  // namespace dlperf::cuda

namespace dlperf {
int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int64_t cuda_device_memory_bytes(int local_rank) {
  const int n = cuda_device_count();
  if (n == 0 || local_rank < 0) return 0;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, local_rank % n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(p.totalGlobalMem);
}

std::vector<std::string> cuda_pci_bus_ids() {
  std::vector<std::string> ids;
  for (int d = 0; d < cuda_device_count(); ++d) {
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) != cudaSuccess) {
      cudaGetLastError();
      bus[0] = '\0';
    }
    ids.emplace_back(bus);
  }
  return ids;
}
}  // namespace dlperf
