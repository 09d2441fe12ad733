// Batch normalisation in training mode on oneDNN, optionally fused with the ReLU that
// follows it (fuse_norm_relu: the backward reads the ReLU mask from a workspace instead of
// a separate eltwise pass over memory). Scale and shift come straight from the f32 master
// parameters; statistics are f32 in every precision.
#include <algorithm>

#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuBatchNorm final : public WithParams<BatchNorm> {
 public:
  CpuBatchNorm(Ctx ctx, const BatchNormSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), spec_(s) {
    const Dims& xd = x.dims();
    if (xd.size() != 4 || xd[1] != s.channels)
      throw_usage_error("batch_norm " + s.name + ": input " + to_string(xd) + " does not have " + std::to_string(s.channels) + " channels");
    x_dims_ = xd;
    dtype_ = x.dtype();
    count_ = xd[0] * xd[2] * xd[3];
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (s.fuse_relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
    const md x_md = x.desc();
    fwd_pd_ = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, x_md, s.eps, flags), ctx_->engine);
    bwd_pd_ = dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, x_md, x_md, s.eps, flags), ctx_->engine, fwd_pd_);
    fwd_ = dnnl::batch_normalization_forward(fwd_pd_);
    bwd_ = dnnl::batch_normalization_backward(bwd_pd_);
    record_kernel(*ctx_, s.name, "forward", shape_of(xd, dtype_), fwd_pd_);
    record_kernel(*ctx_, s.name, "backward", shape_of(xd, dtype_), bwd_pd_);
    const md c_md = plain_md({s.channels}, DType::f32);
    mean_ = dnnl::memory(fwd_pd_.mean_desc(), ctx_->engine);
    var_ = dnnl::memory(fwd_pd_.variance_desc(), ctx_->engine);
    if (s.fuse_relu) workspace_ = dnnl::memory(fwd_pd_.workspace_desc(), ctx_->engine);
    running_mean_.assign(static_cast<size_t>(s.channels), 0.0f);
    running_var_.assign(static_cast<size_t>(s.channels), 1.0f);
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.channels}, c_md);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.channels}, c_md);
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, x_dims_, dtype_, fwd_pd_.dst_desc()); }

  void forward(const Tensor& x, Tensor& y) override {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, cpu(x).mem()},         {DNNL_ARG_DST, cpu(y).mem()},
                                               {DNNL_ARG_SCALE, params_[0].value()}, {DNNL_ARG_SHIFT, params_[1].value()},
                                               {DNNL_ARG_MEAN, mean_},               {DNNL_ARG_VARIANCE, var_}};
    if (spec_.fuse_relu) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    fwd_.execute(ctx_->stream, args);
    update_running_stats();
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, cpu(x).mem()},          {DNNL_ARG_MEAN, mean_},
        {DNNL_ARG_VARIANCE, var_},             {DNNL_ARG_DIFF_DST, cpu(dy).mem()},
        {DNNL_ARG_SCALE, params_[0].value()},  {DNNL_ARG_SHIFT, params_[1].value()},
        {DNNL_ARG_DIFF_SRC, cpu(dx).mem()},
        {DNNL_ARG_DIFF_SCALE, params_[0].grad()}, {DNNL_ARG_DIFF_SHIFT, params_[1].grad()}};
    if (spec_.fuse_relu) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    bwd_.execute(ctx_->stream, args);
  }

  void read_running_stats(std::span<float> mean, std::span<float> var) const override {
    std::copy(running_mean_.begin(), running_mean_.end(), mean.begin());
    std::copy(running_var_.begin(), running_var_.end(), var.begin());
  }

 private:
  // PyTorch's update: running = (1 - m) running + m batch, with the unbiased batch variance.
  void update_running_stats() {
    const float m = spec_.momentum;
    const float unbias = count_ > 1 ? static_cast<float>(count_) / static_cast<float>(count_ - 1) : 1.0f;
    const auto* mean = static_cast<const float*>(mean_.get_data_handle());
    const auto* var = static_cast<const float*>(var_.get_data_handle());
    for (size_t c = 0; c < running_mean_.size(); ++c) {
      running_mean_[c] = (1.0f - m) * running_mean_[c] + m * mean[c];
      running_var_[c] = (1.0f - m) * running_var_[c] + m * var[c] * unbias;
    }
  }

  Ctx ctx_;
  BatchNormSpec spec_;
  Dims x_dims_;
  DType dtype_;
  int64_t count_ = 0;  // N * H * W values per channel
  dnnl::batch_normalization_forward::primitive_desc fwd_pd_;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd_;
  dnnl::batch_normalization_forward fwd_;
  dnnl::batch_normalization_backward bwd_;
  dnnl::memory mean_, var_, workspace_;  // (C), (C): this step's batch statistics
  std::vector<float> running_mean_, running_var_;
};

}  // namespace

std::unique_ptr<BatchNorm> make_batch_norm(Ctx ctx, const BatchNormSpec& s, const Tensor& x) {
  return std::make_unique<CpuBatchNorm>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
