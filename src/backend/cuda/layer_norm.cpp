// Layer normalisation over the features of x (M, C) (kernels in layer_norm.cu); weight and
// bias (C) are read from the f32 master values, their gradients written in f32. The row
// statistics (M) are kept from forward for backward.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaLayerNorm final : public WithParams<LayerNorm> {
 public:
  CudaLayerNorm(Ctx ctx, const LayerNormSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), spec_(s), dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.features)
      throw_usage_error("layer_norm " + s.name + ": input " + to_string(xd) + " is not (M, " + std::to_string(s.features) + ")");
    rows_ = xd[0];
    stats_ = ctx_->alloc(static_cast<size_t>(2 * rows_) * sizeof(float));  // mean (M) | rstd (M)
    ctx_->scratch.reserve(static_cast<size_t>(layer_norm_partial_rows(rows_) * 2 * s.features) * sizeof(float));
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {s.features}, DType::f32);
    add_param(ctx_, s.name + ".bias", ParamRole::norm_shift, {s.features}, DType::f32);
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{rows_, spec_.features}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    DLPERF_CHECK(launch_layer_norm_forward(dev(x).data(), elem(dtype_), params_[0].value(), params_[1].value(), dev(y).data(), mean(),
                                           rstd(), rows_, spec_.features, spec_.eps, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    DLPERF_CHECK(launch_layer_norm_backward(dev(x).data(), dev(dy).data(), elem(dtype_), params_[0].value(), mean(), rstd(),
                                            dev(dx).data(), params_[0].grad(), params_[1].grad(), ctx_->scratch.get<float>(), rows_,
                                            spec_.features, ctx_->s()));
  }

 private:
  float* mean() const { return stats_.as<float>(); }
  float* rstd() const { return stats_.as<float>() + rows_; }

  Ctx ctx_;
  LayerNormSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  DeviceMemory stats_;
};

}  // namespace

std::unique_ptr<LayerNorm> make_layer_norm(Ctx ctx, const LayerNormSpec& s, const Tensor& x) {
  return std::make_unique<CudaLayerNorm>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
