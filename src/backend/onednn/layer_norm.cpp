// Layer normalisation on oneDNN's layer_normalization primitive (BERT's LayerNorm, eps
// 1e-12): y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim. The data may
// be f32 or bf16; oneDNN keeps the statistics, scale and shift (and their gradients) in f32.
// The forward saves mean and variance for the backward of the same step.
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

const auto kFlags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

class CpuLayerNorm final : public WithParams<LayerNorm> {
 public:
  CpuLayerNorm(Ctx ctx, const LayerNormSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), dims_(x.dims()), dtype_(x.dtype()) {
    if (dims_.size() != 2 || dims_[1] != s.features)
      throw_usage_error("layer_norm " + s.name + ": input " + to_string(dims_) + " is not (M, " + std::to_string(s.features) + ")");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("layer_norm " + s.name + ": f32 or bf16 data only");
    const md x_md = plain_md(dims_, dtype_);  // (M, C)
    fwd_pd_ = compat::layer_norm_forward(ctx_->engine, x_md, s.eps, kFlags);
    bwd_pd_ = compat::layer_norm_backward(ctx_->engine, x_md, s.eps, kFlags, fwd_pd_);
    fwd_ = dnnl::layer_normalization_forward(fwd_pd_);
    bwd_ = dnnl::layer_normalization_backward(bwd_pd_);
    record_kernel(*ctx_, s.name, "forward", shape_of(dims_, dtype_), fwd_pd_);
    record_kernel(*ctx_, s.name, "backward", shape_of(dims_, dtype_), bwd_pd_);
    mean_ = ChargedMemory(*ctx_, fwd_pd_.mean_desc());      // (M) f32
    var_ = ChargedMemory(*ctx_, fwd_pd_.variance_desc());   // (M) f32
    const md c_md = plain_md({s.features}, DType::f32);            // (C)
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.features}, c_md);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.features}, c_md);
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, dims_, dtype_, fwd_pd_.dst_desc()); }

  void forward(const Tensor& x, Tensor& y) override {
    fwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, cpu(x).mem()},
                                {DNNL_ARG_DST, cpu(y).mem()},
                                {DNNL_ARG_MEAN, mean_},
                                {DNNL_ARG_VARIANCE, var_},
                                {DNNL_ARG_SCALE, params_[0].value()},
                                {DNNL_ARG_SHIFT, params_[1].value()}});
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    bwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, cpu(x).mem()},
                                {DNNL_ARG_DIFF_DST, cpu(dy).mem()},
                                {DNNL_ARG_MEAN, mean_},
                                {DNNL_ARG_VARIANCE, var_},
                                {DNNL_ARG_SCALE, params_[0].value()},
                                {DNNL_ARG_SHIFT, params_[1].value()},  // oneDNN 2.6 asks for it though dx does not depend on it
                                {DNNL_ARG_DIFF_SRC, cpu(dx).mem()},
                                {DNNL_ARG_DIFF_SCALE, params_[0].grad()},
                                {DNNL_ARG_DIFF_SHIFT, params_[1].grad()}});
  }

 private:
  Ctx ctx_;
  Dims dims_;
  DType dtype_;
  dnnl::layer_normalization_forward::primitive_desc fwd_pd_;
  dnnl::layer_normalization_backward::primitive_desc bwd_pd_;
  dnnl::layer_normalization_forward fwd_;
  dnnl::layer_normalization_backward bwd_;
  ChargedMemory mean_, var_;
};

}  // namespace

std::unique_ptr<LayerNorm> make_layer_norm(Ctx ctx, const LayerNormSpec& s, const Tensor& x) {
  return std::make_unique<CpuLayerNorm>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
