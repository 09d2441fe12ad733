// Batch normalisation in training mode on oneDNN, optionally fused with the ReLU that
// follows it (fuse_norm_relu: the backward reads the ReLU mask from a workspace instead of
// a separate eltwise pass over memory). Scale and shift come straight from the f32 master
// parameters; statistics are f32 in every precision.
// With a residual (BatchNormSpec::residual, ResNet's bottleneck output) the same semantics as
// the CUDA backend's fused kernel, y = relu(bn(x) + z), come from the batch norm followed by a
// binary add with the ReLU as its post-op (in place on y); backward masks dy with y into dz
// (the residual's gradient, in z's layout), and the batch norm's backward reads that mask.
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
    residual_ = s.residual != nullptr;
    if (s.fuse_relu && !residual_) flags |= dnnl::normalization_flags::fuse_norm_relu;
    const md x_md = x.desc();
    fwd_pd_ = compat::batch_norm_forward(ctx_->engine, x_md, s.eps, flags);
    bwd_pd_ = compat::batch_norm_backward(ctx_->engine, x_md, s.eps, flags, fwd_pd_);
    fwd_ = dnnl::batch_normalization_forward(fwd_pd_);
    bwd_ = dnnl::batch_normalization_backward(bwd_pd_);
    record_kernel(*ctx_, s.name, "forward", shape_of(xd, dtype_), fwd_pd_);
    record_kernel(*ctx_, s.name, "backward", shape_of(xd, dtype_), bwd_pd_);
    const md c_md = plain_md({s.channels}, DType::f32);
    mean_ = ChargedMemory(*ctx_, fwd_pd_.mean_desc());
    var_ = ChargedMemory(*ctx_, fwd_pd_.variance_desc());
    if (s.fuse_relu && !residual_) workspace_ = ChargedMemory(*ctx_, fwd_pd_.workspace_desc());
    if (residual_) plan_residual(cpu(*s.residual).desc());
    spec_.residual = nullptr;  // planned for; the tensor itself may go
    running_mean_.assign(static_cast<size_t>(s.channels), 0.0f);
    running_var_.assign(static_cast<size_t>(s.channels), 1.0f);
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.channels}, c_md);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.channels}, c_md);
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, x_dims_, dtype_, fwd_pd_.dst_desc()); }

  void forward(const Tensor& x, Tensor& y) override {
    DLPERF_ASSERT(!residual_, "batch_norm " + spec_.name + " is planned with a residual: call forward_add");
    normalise(x, y);
  }

  void forward_add(const Tensor& x, const Tensor& z, Tensor& y) override {
    DLPERF_ASSERT(residual_, "batch_norm " + spec_.name + " is planned without a residual: call forward");
    normalise(x, y);
    add_.execute(ctx_->stream, {{DNNL_ARG_SRC_0, cpu(y).mem()}, {DNNL_ARG_SRC_1, cpu(z).mem()}, {DNNL_ARG_DST, cpu(y).mem()}});
    y_ = cpu(y).mem();
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    DLPERF_ASSERT(!residual_, "batch_norm " + spec_.name + " is planned with a residual: call backward_add");
    normalise_backward(x, cpu(dy).mem(), dx);
  }

  void backward_add(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dz) override {
    DLPERF_ASSERT(residual_ && static_cast<bool>(y_), "batch_norm backward_add follows forward_add");
    // d = relu'(y) dy (or dy), the gradient of bn(x) + z: both inputs of the sum receive it.
    const bool direct = !to_z_.needed();
    const dnnl::memory& d = direct ? cpu(dz).mem() : d_;
    if (spec_.fuse_relu)
      relu_bwd_.execute(ctx_->stream, {{DNNL_ARG_DST, y_}, {DNNL_ARG_DIFF_DST, cpu(dy).mem()}, {DNNL_ARG_DIFF_SRC, d}});
    else
      reorder(*ctx_, cpu(dy).mem(), d);
    if (!direct) to_z_.run(*ctx_, d, cpu(dz).mem());
    normalise_backward(x, d, dx);
  }

 private:
  void plan_residual(const md& z_md) {
    const md y_md = fwd_pd_.dst_desc();
    dnnl::primitive_attr attr;
    if (spec_.fuse_relu) {
      dnnl::post_ops po;
      compat::append_eltwise(po, dnnl::algorithm::eltwise_relu);
      attr.set_post_ops(po);
      const auto pd = compat::eltwise_backward(ctx_->engine, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, y_md);
      relu_bwd_ = dnnl::eltwise_backward(pd);
      record_kernel(*ctx_, spec_.name, "backward_relu", shape_of(x_dims_, dtype_), pd);
    }
    const auto add_pd = compat::binary(ctx_->engine, dnnl::algorithm::binary_add, y_md, z_md, y_md, attr);
    add_ = dnnl::binary(add_pd);
    record_kernel(*ctx_, spec_.name, "forward_add", shape_of(x_dims_, dtype_), add_pd);
    to_z_ = PlannedReorder(*ctx_, y_md, z_md, spec_.name + " residual gradient");
    if (to_z_.needed()) d_ = ChargedMemory(*ctx_, y_md);
  }

  void normalise(const Tensor& x, Tensor& y) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, cpu(x).mem()},         {DNNL_ARG_DST, cpu(y).mem()},
                                               {DNNL_ARG_SCALE, params_[0].value()}, {DNNL_ARG_SHIFT, params_[1].value()},
                                               {DNNL_ARG_MEAN, mean_},               {DNNL_ARG_VARIANCE, var_}};
    if (workspace_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    fwd_.execute(ctx_->stream, args);
    if (update_running_) update_running_stats();
  }

  void normalise_backward(const Tensor& x, const dnnl::memory& dy, Tensor& dx) {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, cpu(x).mem()},          {DNNL_ARG_MEAN, mean_},
        {DNNL_ARG_VARIANCE, var_},             {DNNL_ARG_DIFF_DST, dy},
        {DNNL_ARG_SCALE, params_[0].value()},  {DNNL_ARG_DIFF_SRC, cpu(dx).mem()},
        {DNNL_ARG_DIFF_SCALE, params_[0].grad()}, {DNNL_ARG_DIFF_SHIFT, params_[1].grad()}};
    // 2.x executes with the shift among the arguments; 3.x rejects the call when it is given
    // ("bad number of inputs (expected 5 got 6)"), though its exec_arg_md query names it.
    if (!compat::kOneDnn3) args.emplace(DNNL_ARG_SHIFT, params_[1].value());
    if (workspace_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    bwd_.execute(ctx_->stream, args);
  }

 public:
  void set_running_stats_update(bool on) override { update_running_ = on; }
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
  ChargedMemory mean_, var_, workspace_;  // (C), (C): this step's batch statistics
  bool residual_ = false;
  dnnl::binary add_;                    // residual: y = act(y + z)
  dnnl::eltwise_backward relu_bwd_;     // residual with ReLU: d = [y > 0] dy
  PlannedReorder to_z_;                 // residual: d in y's layout -> dz in z's, when they differ
  ChargedMemory d_;                     // that d, when it needs its own buffer
  dnnl::memory y_;                      // the last forward's y
  std::vector<float> running_mean_, running_var_;
  bool update_running_ = true;  // off while a block is recomputed (--recompute block)
};

}  // namespace

std::unique_ptr<BatchNorm> make_batch_norm(Ctx ctx, const BatchNormSpec& s, const Tensor& x) {
  return std::make_unique<CpuBatchNorm>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
