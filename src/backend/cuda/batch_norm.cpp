// Batch normalisation in training mode on cuDNN (cudnnBatchNormalization*Ex), x (N, C, H, W)
// in either layout; scale, shift, batch statistics and running statistics are f32 (C).
// Running statistics follow PyTorch: running = (1 - m) running + m batch with cuDNN's
// exponentialAverageFactor = m, and cuDNN keeps the unbiased variance as PyTorch does.
//
// fuse_relu: on NHWC f16 with C % 4 == 0 cuDNN fuses the ReLU (CUDNN_BATCHNORM_OPS_BN_ACTIVATION,
// the persistent NHWC kernels, which need y again in backward). Elsewhere the ReLU runs in
// place on y after BN, and backward first masks dy with y > 0 into the shared scratch.
// Either way backward reads the y of the last forward: callers keep it alive until then, as
// every model does (it is the next layer's input).
#include <algorithm>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaBatchNorm final : public WithParams<BatchNorm> {
 public:
  CudaBatchNorm(Ctx ctx, const BatchNormSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), spec_(s) {
    const Dims& xd = x.dims();
    if (xd.size() != 4 || xd[1] != s.channels)
      throw_usage_error("batch_norm " + s.name + ": input " + to_string(xd) + " does not have " + std::to_string(s.channels) + " channels");
    x_dims_ = xd;
    dtype_ = x.dtype();
    nhwc_ = x.nhwc();
    // cuDNN's lower bound on epsilon; PyTorch's default 1e-5 sits exactly on it.
    eps_ = std::max(static_cast<double>(s.eps), CUDNN_BN_MIN_EPSILON);
    mode_ = nhwc_ && dtype_ != DType::f32 ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
    fused_ = s.fuse_relu && nhwc_ && dtype_ == DType::f16 && s.channels % 4 == 0;
    ops_ = fused_ ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
    set_4d(x_desc_, dtype_, nhwc_, xd[0], xd[1], xd[2], xd[3]);
    DLPERF_CHECK(cudnnDeriveBNTensorDescriptor(c_desc_, x_desc_, mode_));
    DLPERF_CHECK(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    cudnnActivationDescriptor_t act = fused_ ? relu_.get() : nullptr;

    size_t fwd_ws = 0, bwd_ws = 0, reserve = 0;
    const cudnnHandle_t h = ctx_->cudnn;
    DLPERF_CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, mode_, ops_, x_desc_, nullptr, x_desc_, c_desc_, act, &fwd_ws));
    DLPERF_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, mode_, ops_, x_desc_, x_desc_, x_desc_, nullptr, x_desc_, c_desc_,
                                                                   act, &bwd_ws));
    DLPERF_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode_, ops_, act, x_desc_, &reserve));
    ctx_->workspace.reserve(std::max(fwd_ws, bwd_ws));
    reserve_ = ctx_->alloc(reserve);  // per layer: it carries state from forward to backward
    if (s.fuse_relu && !fused_) ctx_->scratch.reserve(static_cast<size_t>(x.numel()) * dtype_size(dtype_));

    const auto c = static_cast<size_t>(s.channels);
    stats_ = ctx_->alloc(4 * c * sizeof(float));  // running mean, running var, saved mean, saved 1/std
    DLPERF_CHECK(launch_fill(running_mean(), ElemType::f32, s.channels, 0.0f, ctx_->s()));
    DLPERF_CHECK(launch_fill(running_var(), ElemType::f32, s.channels, 1.0f, ctx_->s()));
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.channels}, DType::f32);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.channels}, DType::f32);
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, x_dims_, dtype_, nhwc_ ? Layout::channels_last : Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    const float one = 1.0f, zero = 0.0f;
    DLPERF_CHECK(cudnnBatchNormalizationForwardTrainingEx(
        ctx_->cudnn, mode_, ops_, &one, &zero, x_desc_, dev(x).data(), nullptr, nullptr, x_desc_, dev(y).data(), c_desc_,
        params_[0].value(), params_[1].value(), static_cast<double>(spec_.momentum), running_mean(), running_var(), eps_, saved_mean(),
        saved_inv_std(), fused_ ? relu_.get() : nullptr, ctx_->workspace.get(), ctx_->workspace.bytes(), reserve_.get(),
        reserve_.bytes()));
    if (spec_.fuse_relu && !fused_)
      DLPERF_CHECK(launch_activation_forward(ActKind::relu, dev(y).data(), dev(y).data(), elem(dtype_), y.numel(), ctx_->s()));
    y_ = dev(y).data();
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    DLPERF_ASSERT(y_ != nullptr, "batch_norm backward follows a forward");
    const float one = 1.0f, zero = 0.0f;
    const void* grad = dev(dy).data();
    if (spec_.fuse_relu && !fused_) {
      DLPERF_CHECK(launch_relu_backward_from_y(y_, grad, ctx_->scratch.get(), elem(dtype_), dy.numel(), ctx_->s()));
      grad = ctx_->scratch.get();
    }
    DLPERF_CHECK(cudnnBatchNormalizationBackwardEx(
        ctx_->cudnn, mode_, ops_, &one, &zero, &one, &zero, x_desc_, dev(x).data(), x_desc_, y_, x_desc_, grad, nullptr, nullptr,
        x_desc_, dev(dx).data(), c_desc_, params_[0].value(), params_[1].value(), params_[0].grad(), params_[1].grad(), eps_,
        saved_mean(), saved_inv_std(), fused_ ? relu_.get() : nullptr, ctx_->workspace.get(), ctx_->workspace.bytes(), reserve_.get(),
        reserve_.bytes()));
  }

  void read_running_stats(std::span<float> mean, std::span<float> var) const override {
    const size_t c = static_cast<size_t>(spec_.channels);
    DLPERF_ASSERT(mean.size() == c && var.size() == c, "running statistics are (C)");
    DLPERF_CHECK(cudaMemcpyAsync(mean.data(), stats_.as<float>(), c * sizeof(float), cudaMemcpyDeviceToHost, ctx_->s()));
    DLPERF_CHECK(cudaMemcpyAsync(var.data(), stats_.as<float>() + c, c * sizeof(float), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();
  }

 private:
  float* running_mean() const { return stats_.as<float>(); }
  float* running_var() const { return stats_.as<float>() + spec_.channels; }
  float* saved_mean() const { return stats_.as<float>() + 2 * spec_.channels; }
  float* saved_inv_std() const { return stats_.as<float>() + 3 * spec_.channels; }

  Ctx ctx_;
  BatchNormSpec spec_;
  Dims x_dims_;
  DType dtype_ = DType::f32;
  bool nhwc_ = false;
  bool fused_ = false;
  double eps_ = 1e-5;
  cudnnBatchNormMode_t mode_{};
  cudnnBatchNormOps_t ops_{};
  TensorDesc x_desc_, c_desc_;  // x, y, dy, dx share x_desc_; c_desc_: (1, C, 1, 1) f32
  ActivationDesc relu_;
  DeviceMemory reserve_, stats_;
  const void* y_ = nullptr;  // the last forward's output
};

}  // namespace

std::unique_ptr<BatchNorm> make_batch_norm(Ctx ctx, const BatchNormSpec& s, const Tensor& x) {
  return std::make_unique<CudaBatchNorm>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
