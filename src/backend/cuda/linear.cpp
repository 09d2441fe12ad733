// Fully connected layer on cuBLAS: y (M, out) = x (M, in) W^T + b, W (out, in) canonical.
//   forward  y  = x W^T          (GEMM, then the bias-add kernel)
//   backward dW = dy^T x         (f16/bf16 inputs, f32 output straight into the gradient slot)
//            db = sum_rows dy    (GEMM against ones, f32)
//            dx = dy W
// f16/bf16 runs read the compute copy of W; math is f32 throughout (cuBLAS's tensor cores).
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaLinear final : public WithParams<Linear> {
 public:
  CudaLinear(Ctx ctx, const LinearSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), bias_(s.bias), dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.in_features)
      throw_usage_error("linear " + s.name + ": input " + to_string(xd) + " is not (M, " + std::to_string(s.in_features) + ")");
    m_ = xd[0];
    in_ = s.in_features;
    out_ = s.out_features;
    add_param(ctx_, s.name + ".weight", ParamRole::weight, {out_, in_}, dtype_);
    if (bias_) {
      add_param(ctx_, s.name + ".bias", ParamRole::bias, {out_}, DType::f32);
      ctx_->ones(dtype_, m_);
    }
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, Dims{m_, out_}, dtype_, Layout::canonical); }

  void forward(const Tensor& x, Tensor& y) override {
    gemm(*ctx_, {false, true, m_, out_, in_, 1}, 1.0f, dev(x).data(), params_[0].compute(), dtype_, 0.0f, dev(y).data(), dtype_);
    if (bias_) DLPERF_CHECK(launch_add_bias(dev(y).data(), elem(dtype_), params_[1].value(), m_ * out_, out_, 1, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    gemm(*ctx_, {true, false, out_, in_, m_, 1}, 1.0f, dev(dy).data(), dev(x).data(), dtype_, 0.0f, params_[0].grad(), DType::f32);
    if (bias_) column_sums(*ctx_, dev(dy).data(), dtype_, m_, out_, params_[1].grad());
    if (dx) gemm(*ctx_, {false, false, m_, in_, out_, 1}, 1.0f, dev(dy).data(), params_[0].compute(), dtype_, 0.0f, dev(*dx).data(), dtype_);
  }

 private:
  Ctx ctx_;
  bool bias_;
  DType dtype_;
  int64_t m_ = 0, in_ = 0, out_ = 0;
};

}  // namespace

std::unique_ptr<Linear> make_linear(Ctx ctx, const LinearSpec& s, const Tensor& x) {
  return std::make_unique<CudaLinear>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
