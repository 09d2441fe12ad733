// Fully connected layer on cuBLAS(Lt): y (M, out) = x (M, in) W^T + b, W (out, in) canonical.
//   forward  y  = x W^T + b      one cuBLASLt GEMM with the bias epilogue
//   backward dW = dy^T x,        one cuBLASLt GEMM (f16/bf16 inputs, f32 output straight into
//            db = sum_rows dy    the gradient slot) whose BGRADB epilogue writes db in f32
//            dx = dy W
// f16/bf16 runs read the compute copies of W and b; math is f32 throughout (tensor cores).
// Where cuBLASLt has no epilogue algorithm for a shape, the plain GEMM plus the bias-add kernel
// and a GEMM against ones (db) run instead, with a one-line warning (lt_gemm.h).
#include "backend/cuda/lt_gemm.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaLinear final : public WithParams<Linear> {
 public:
  CudaLinear(Ctx ctx, const LinearSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)), bias_(s.bias), dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.in_features || x.padded())
      throw_usage_error("linear " + s.name + ": input " + to_string(xd) + " is not a dense (M, " + std::to_string(s.in_features) + ")");
    m_ = xd[0];
    in_ = s.in_features;
    out_ = s.out_features;
    add_param(ctx_, s.name + ".weight", ParamRole::weight, {out_, in_}, dtype_);
    if (s.add_grads && bias_) throw_usage_error("linear " + s.name + ": adding gradients needs a bias-free layer");
    add_grads_ = s.add_grads;
    if (!bias_) return;
    add_param(ctx_, s.name + ".bias", ParamRole::bias, {out_}, dtype_);  // the epilogue reads it in y's type
    fwd_ = std::make_unique<LtGemm>(*ctx_, GemmShape{false, true, m_, out_, in_, 1}, in_, in_, out_, dtype_, dtype_, LtEpilogue::bias);
    dw_ = std::make_unique<LtGemm>(*ctx_, GemmShape{true, false, out_, in_, m_, 1}, out_, in_, in_, dtype_, DType::f32, LtEpilogue::bgrad);
    const std::string shape = shape_str(xd, dtype_) + " -> " + std::to_string(out_);
    if (fwd_->valid()) {
      ctx_->record_kernel(s.name, "forward", shape, "cublaslt bias epilogue, " + ctx_->gemm_math_name(dtype_));
    } else {
      ctx_->warn_fallback(s.name, "forward", shape, "cublas gemm + dlperf:add_bias, " + ctx_->gemm_math_name(dtype_), fwd_->why_not());
      fwd_.reset();
    }
    if (dw_->valid()) {
      ctx_->record_kernel(s.name, "backward_weights", shape, "cublaslt bgradb epilogue, " + ctx_->gemm_math_name(dtype_));
    } else {
      ctx_->warn_fallback(s.name, "backward_weights", shape, "cublas gemm + column sums, " + ctx_->gemm_math_name(dtype_), dw_->why_not());
      dw_.reset();
    }
    if (!fwd_ || !dw_) ctx_->ones(dtype_, m_);
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, Dims{m_, out_}, dtype_, Layout::canonical); }

  void forward(const Tensor& x, Tensor& y) override {
    if (fwd_) {
      fwd_->run(*ctx_, 1.0f, dev(x).data(), params_[0].compute(), dev(y).data(), params_[1].compute());
      return;
    }
    gemm(*ctx_, {false, true, m_, out_, in_, 1}, 1.0f, dev(x).data(), params_[0].compute(), dtype_, 0.0f, dev(y).data(), dtype_);
    if (bias_) DLPERF_CHECK(launch_add_bias(dev(y).data(), elem(dtype_), params_[1].value(), m_ * out_, out_, 1, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { run_backward(x, dy, dx, false); }
  // A bias-free layer's dW = dy^T x is one plain GEMM: adding it is its beta = 1.
  void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    if (!add_grads_) Linear::backward_add(x, dy, dx);
    run_backward(x, dy, dx, true);
  }

 private:
  void run_backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool add) {
    if (dw_) {
      dw_->run(*ctx_, 1.0f, dev(dy).data(), dev(x).data(), params_[0].grad(), params_[1].grad());
    } else {
      gemm(*ctx_, {true, false, out_, in_, m_, 1}, 1.0f, dev(dy).data(), dev(x).data(), dtype_, add ? 1.0f : 0.0f, params_[0].grad(),
           DType::f32);
      if (bias_) column_sums(*ctx_, dev(dy).data(), dtype_, m_, out_, params_[1].grad());
    }
    if (dx) gemm(*ctx_, {false, false, m_, in_, out_, 1}, 1.0f, dev(dy).data(), params_[0].compute(), dtype_, 0.0f, dev(*dx).data(), dtype_);
  }

  Ctx ctx_;
  bool bias_, add_grads_ = false;
  DType dtype_;
  int64_t m_ = 0, in_ = 0, out_ = 0;
  std::unique_ptr<LtGemm> fwd_, dw_;  // null: no bias, or cuBLASLt declined the shape
};

}  // namespace

std::unique_ptr<Linear> make_linear(Ctx ctx, const LinearSpec& s, const Tensor& x) {
  return std::make_unique<CudaLinear>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
