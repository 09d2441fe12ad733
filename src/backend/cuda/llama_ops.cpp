// Llama's RMSNorm, RoPE, SwiGLU and token cross-entropy on the CUDA backend (kernels in
// llama_kernels.cu), with the CPU backend's semantics (backend/ops.h): f32, bf16 and f16 data,
// f32 statistics and parameters. The causal attention is in causal_attention.cpp.
#include <cmath>
#include <numbers>

#include "backend/cuda/llama_kernels.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

void require_dense(const CudaTensor& t, const Dims& want, const std::string& what) {
  if (t.dims() != want || t.layout() != Layout::canonical || t.padded())
    throw_usage_error(what + ": input " + to_string(t.dims()) + " is not a dense " + to_string(want));
}

// x (M, C) -> y (M, C); rstd (M) kept from forward for backward; weight (C) f32.
class CudaRmsNorm final : public WithParams<RmsNorm> {
 public:
  CudaRmsNorm(Ctx ctx, const RmsNormSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), spec_(s), dtype_(x.dtype()) {
    if (x.dims().size() != 2) throw_usage_error("rms_norm " + s.name + ": input " + to_string(x.dims()) + " is not (M, C)");
    rows_ = x.dims()[0];
    require_dense(x, {rows_, s.features}, "rms_norm " + s.name);
    blocks_ = rms_norm_backward_blocks(rows_, ctx_->props.multiProcessorCount);
    rstd_ = ctx_->alloc(static_cast<size_t>(rows_) * sizeof(float));
    // The (blocks, C) f32 partial sums of the weight's gradient live only between backward's two
    // launches: in the shared scratch (stream-ordered), not a buffer per op (65 of 8.7 MB each for
    // Llama 3.1 8B on 132 SMs).
    ctx_->scratch.reserve(static_cast<size_t>(blocks_) * static_cast<size_t>(s.features) * sizeof(float));
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.features}, DType::f32);
    for (const char* pass : {"forward", "backward"}) ctx_->record_kernel(s.name, pass, shape_str(x.dims(), dtype_), "dlperf:rms_norm");
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{rows_, spec_.features}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    DLPERF_CHECK(launch_rms_norm_forward(dev(x).data(), params_[0].value(), dev(y).data(), rstd_.as<float>(), elem(dtype_), rows_,
                                         spec_.features, spec_.eps, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    DLPERF_CHECK(launch_rms_norm_backward(dev(x).data(), dev(dy).data(), params_[0].value(), rstd_.as<float>(), dev(dx).data(),
                                          params_[0].grad(), ctx_->scratch.get<float>(), blocks_, elem(dtype_), rows_, spec_.features,
                                          ctx_->s()));
  }

 private:
  Ctx ctx_;
  RmsNormSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  unsigned blocks_ = 1;
  DeviceMemory rstd_;
};

// The cos/sin tables (T, D/2) are computed once on the host in double, as the CPU backend does
// (Meta's apply_scaling), and uploaded in f32: both backends rotate by the same angles.
class CudaRope final : public Rope {
 public:
  CudaRope(Ctx ctx, const RopeSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), s_(s), dtype_(x.dtype()) {
    if (s.head_dim % 2 != 0) throw_usage_error("rope: the head dim " + std::to_string(s.head_dim) + " must be even");
    require_dense(x, {s.batch * s.seq_len, s.heads * s.head_dim}, "rope");
    const int64_t half = s.head_dim / 2;
    std::vector<float> table(static_cast<size_t>(2 * s.seq_len * half));  // cos (T, D/2) | sin (T, D/2)
    for (int64_t i = 0; i < half; ++i) {
      const double f = frequency(i);
      for (int64_t t = 0; t < s.seq_len; ++t) {
        const double a = static_cast<double>(t) * f;
        table[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(a));
        table[static_cast<size_t>((s.seq_len + t) * half + i)] = static_cast<float>(std::sin(a));
      }
    }
    table_ = ctx_->alloc(table.size() * sizeof(float));
    // On the compute stream (non-blocking: not ordered after the legacy stream's copies), then
    // waited for: `table` is pageable and goes out of scope.
    DLPERF_CHECK(cudaMemcpyAsync(table_.get(), table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice, ctx_->s()));
    ctx_->sync();
    for (const char* pass : {"forward", "backward"}) ctx_->record_kernel("rope", pass, shape_str(x.dims(), dtype_), "dlperf:rope");
  }

  void forward(const Tensor& x, Tensor& y) override { rotate(x, y, 1.0f); }
  void backward(const Tensor& dy, Tensor& dx) override { rotate(dy, dx, -1.0f); }

 private:
  // Meta's apply_scaling for pair i (the same as onednn/rope.cpp).
  double frequency(int64_t i) const {
    const double f = std::pow(static_cast<double>(s_.theta), -2.0 * static_cast<double>(i) / static_cast<double>(s_.head_dim));
    if (s_.scale_factor <= 0) return f;
    const double old = static_cast<double>(s_.original_context), lo = s_.low_freq_factor, hi = s_.high_freq_factor;
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen < old / hi) return f;
    if (wavelen > old / lo) return f / s_.scale_factor;
    const double smooth = (old / wavelen - lo) / (hi - lo);
    return (1.0 - smooth) * f / s_.scale_factor + smooth * f;
  }

  void rotate(const Tensor& in, Tensor& out, float sign) const {
    const float* cos_t = table_.as<float>();
    const float* sin_t = cos_t + s_.seq_len * (s_.head_dim / 2);
    DLPERF_CHECK(launch_rope(dev(in).data(), dev(out).data(), cos_t, sin_t, elem(dtype_), s_.batch * s_.seq_len, s_.seq_len, s_.heads,
                             s_.head_dim, sign, ctx_->s()));
  }

  Ctx ctx_;
  RopeSpec s_;
  DType dtype_;
  DeviceMemory table_;
};

class CudaSwiGlu final : public SwiGlu {
 public:
  CudaSwiGlu(Ctx ctx, const CudaTensor& a) : ctx_(std::move(ctx)), dims_(a.dims()), dtype_(a.dtype()) {
    require_dense(a, dims_, "swiglu");
    for (const char* pass : {"forward", "backward"}) ctx_->record_kernel("swiglu", pass, shape_str(dims_, dtype_), "dlperf:swiglu");
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, dims_, dtype_, Layout::canonical); }

  void forward(const Tensor& a, const Tensor& b, Tensor& y) override {
    DLPERF_CHECK(launch_swiglu_forward(dev(a).data(), dev(b).data(), dev(y).data(), elem(dtype_), product(dims_), ctx_->s()));
  }

  void backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) override {
    DLPERF_CHECK(launch_swiglu_backward(dev(a).data(), dev(b).data(), dev(dy).data(), dev(da).data(), dev(db).data(), elem(dtype_),
                                        product(dims_), ctx_->s()));
  }

 private:
  Ctx ctx_;
  Dims dims_;
  DType dtype_;
};

// logits (M, K) in the compute dtype, never copied to f32: lse (M) and the loss stay on the
// device; backward may write the gradient over the logits (the head keeps one (M, K) tensor).
class CudaTokenCrossEntropy final : public SoftmaxCrossEntropy {
 public:
  CudaTokenCrossEntropy(Ctx ctx, const CrossEntropySpec& s, const CudaTensor& logits) : ctx_(std::move(ctx)), spec_(s), dtype_(logits.dtype()) {
    if (logits.dims().size() != 2) throw_usage_error("token_cross_entropy: logits " + to_string(logits.dims()) + " are not (M, K)");
    rows_ = logits.dims()[0];
    require_dense(logits, {rows_, s.classes}, "token_cross_entropy");
    if (s.label_smoothing != 0.0f) throw_usage_error("token_cross_entropy: no label smoothing");
    stats_ = ctx_->alloc(static_cast<size_t>(3 * rows_ + 2) * sizeof(float));  // lse (M) | row losses, counts (2M) | loss, count
    for (const char* pass : {"forward", "backward"})
      ctx_->record_kernel("token_cross_entropy", pass, shape_str(logits.dims(), dtype_), "dlperf:token_cross_entropy");
  }

  void forward(const Tensor& logits, const Tensor& labels) override {
    DLPERF_ASSERT(labels.dtype() == DType::s32 && labels.numel() == rows_, "labels are (M) s32");
    logits_ = dev(logits).data();
    labels_ = dev(labels).as<const int32_t>();
    DLPERF_CHECK(launch_token_xent_forward(logits_, elem(dtype_), labels_, rows_, spec_.classes, spec_.ignore_index, spec_.mean_over,
                                           lse(), lse() + rows_, totals(), ctx_->s()));
  }

  float loss() override {
    float host = 0.0f;
    DLPERF_CHECK(cudaMemcpyAsync(&host, totals(), sizeof(float), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();
    return host;
  }

  const float* loss_location() const override { return totals(); }

  void backward(Tensor& dlogits, const LossGradScale& scale) override {
    DLPERF_ASSERT(logits_ != nullptr, "token_cross_entropy backward follows a forward");
    DLPERF_ASSERT(dlogits.dtype() == dtype_ && dlogits.numel() == rows_ * spec_.classes && !dev(dlogits).padded(),
                  "dlogits of the logits' shape");
    DLPERF_CHECK(launch_token_xent_backward(logits_, dev(dlogits).data(), elem(dtype_), labels_, lse(), totals(), rows_, spec_.classes,
                                            spec_.ignore_index, scale.value, scale.device, ctx_->s()));
  }

 private:
  float* lse() const { return stats_.as<float>(); }
  float* totals() const { return stats_.as<float>() + 3 * rows_; }

  Ctx ctx_;
  CrossEntropySpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  DeviceMemory stats_;
  const void* logits_ = nullptr;  // the last forward's inputs
  const int32_t* labels_ = nullptr;
};

}  // namespace

std::unique_ptr<RmsNorm> make_rms_norm(Ctx ctx, const RmsNormSpec& s, const Tensor& x) {
  return std::make_unique<CudaRmsNorm>(std::move(ctx), s, dev(x));
}
std::unique_ptr<Rope> make_rope(Ctx ctx, const RopeSpec& s, const Tensor& x) { return std::make_unique<CudaRope>(std::move(ctx), s, dev(x)); }
std::unique_ptr<SwiGlu> make_swiglu(Ctx ctx, const Tensor& a) { return std::make_unique<CudaSwiGlu>(std::move(ctx), dev(a)); }
std::unique_ptr<SoftmaxCrossEntropy> make_token_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits) {
  return std::make_unique<CudaTokenCrossEntropy>(std::move(ctx), s, dev(logits));
}

}  // namespace dlperf::cuda
