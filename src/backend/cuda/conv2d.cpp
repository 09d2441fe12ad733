// Convolution on cuDNN: forward, backward data and backward filter, planned once.
//   x (N, Cin, H, W) (x) w (Cout, Cin, k, k) -> y (N, Cout, Ho, Wo), in x's layout.
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7), taking the first one
// that succeeds, fits the workspace limit and, for the backward passes, is deterministic (the
// same seed must give the same losses bit for bit; cudnnFind* would also time-race). Each
// direction has its own convolution descriptor because each carries its algorithm's math
// type (tensor cores for f16/bf16; TF32 allowed for f32, as PyTorch's cuDNN default).
// Weights: master f32 KCRS; f16/bf16 or channels-last runs read the compute copy (KRSC for
// NHWC filters). cuDNN writes the filter gradient in the filter's own type and layout, so
// those runs convert it into the f32 KCRS gradient through the shared scratch.
#include <algorithm>
#include <vector>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

constexpr size_t kWorkspaceLimit = size_t{1} << 30;  // per algorithm; the shared workspace is the max

template <class Perf>
const Perf& pick(const std::vector<Perf>& found, int count, bool need_deterministic, const std::string& what) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i) {
      const Perf& p = found[static_cast<size_t>(i)];
      const bool det_ok = !need_deterministic || pass == 1 || p.determinism == CUDNN_DETERMINISTIC;
      if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= kWorkspaceLimit && det_ok) return p;
    }
  throw Error(ErrorKind::library, "cuDNN has no algorithm for " + what + " within " + std::to_string(kWorkspaceLimit >> 20) + " MiB");
}

class CudaConv2d final : public WithParams<Conv2d> {
 public:
  CudaConv2d(Ctx ctx, const Conv2dSpec& s, const CudaTensor& x) : ctx_(std::move(ctx)) {
    const Dims& xd = x.dims();
    if (xd.size() != 4 || xd[1] != s.in_channels)
      throw_usage_error("conv2d " + s.name + ": input " + to_string(xd) + " does not have " + std::to_string(s.in_channels) + " channels");
    const int64_t ho = (xd[2] + 2 * s.padding - s.kernel) / s.stride + 1;
    const int64_t wo = (xd[3] + 2 * s.padding - s.kernel) / s.stride + 1;
    if (ho < 1 || wo < 1)
      throw_usage_error("conv2d " + s.name + ": input " + to_string(xd) + " is too small for a " + std::to_string(s.kernel) + "x" +
                        std::to_string(s.kernel) + " kernel");
    dtype_ = x.dtype();
    nhwc_ = x.nhwc();
    y_dims_ = {xd[0], s.out_channels, ho, wo};
    w_dims_ = {s.out_channels, s.in_channels, s.kernel, s.kernel};
    set_4d(x_desc_, dtype_, nhwc_, xd[0], xd[1], xd[2], xd[3]);
    set_4d(y_desc_, dtype_, nhwc_, xd[0], s.out_channels, ho, wo);
    DLPERF_CHECK(cudnnSetFilter4dDescriptor(w_desc_, cudnn_type(dtype_), nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                            static_cast<int>(s.out_channels), static_cast<int>(s.in_channels),
                                            static_cast<int>(s.kernel), static_cast<int>(s.kernel)));
    for (const ConvDesc* d : {&fwd_desc_, &bwd_data_desc_, &bwd_filter_desc_}) {
      const int p = static_cast<int>(s.padding), st = static_cast<int>(s.stride);
      DLPERF_CHECK(cudnnSetConvolution2dDescriptor(*d, p, p, st, st, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    }
    int n = 0, c = 0, h = 0, w = 0;
    DLPERF_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_desc_, x_desc_, w_desc_, &n, &c, &h, &w));
    DLPERF_ASSERT(n == xd[0] && c == s.out_channels && h == ho && w == wo, "cuDNN agrees on the output shape");
    plan_algorithms(s.name);

    add_param(ctx_, s.name + ".weight", ParamRole::weight, w_dims_, dtype_, nhwc_);
    // cuDNN writes dw in the filter's type and layout; anything but f32 KCRS goes through scratch.
    dw_via_scratch_ = dtype_ != DType::f32 || nhwc_;
    if (dw_via_scratch_) ctx_->scratch.reserve(static_cast<size_t>(product(w_dims_)) * dtype_size(dtype_));
    bias_ = s.bias;
    if (bias_) {
      add_param(ctx_, s.name + ".bias", ParamRole::bias, {s.out_channels}, DType::f32);
      const int64_t hw = ho * wo;
      if (nhwc_) {
        ctx_->ones(dtype_, xd[0] * hw);
      } else {
        ctx_->ones(dtype_, hw);
        ctx_->ones(DType::f32, xd[0]);
        bias_rows_ = ctx_->alloc(static_cast<size_t>(xd[0] * s.out_channels) * sizeof(float));
      }
    }
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, y_dims_, dtype_, nhwc_ ? Layout::channels_last : Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    const float one = 1.0f, zero = 0.0f;
    DLPERF_CHECK(cudnnConvolutionForward(ctx_->cudnn, &one, x_desc_, dev(x).data(), w_desc_, params_[0].compute(), fwd_desc_, fwd_algo_,
                                         ctx_->workspace.get(), ctx_->workspace.bytes(), &zero, y_desc_, dev(y).data()));
    if (bias_) {
      const int64_t hw = y_dims_[2] * y_dims_[3];
      DLPERF_CHECK(launch_add_bias(dev(y).data(), elem(dtype_), params_[1].value(), y.numel(), y_dims_[1], nhwc_ ? 1 : hw, ctx_->s()));
    }
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    const float one = 1.0f, zero = 0.0f;
    void* dw = dw_via_scratch_ ? ctx_->scratch.get() : params_[0].grad();
    DLPERF_CHECK(cudnnConvolutionBackwardFilter(ctx_->cudnn, &one, x_desc_, dev(x).data(), y_desc_, dev(dy).data(), bwd_filter_desc_,
                                                bwd_filter_algo_, ctx_->workspace.get(), ctx_->workspace.bytes(), &zero, w_desc_, dw));
    if (dw_via_scratch_) convert(*ctx_, dw, dtype_, nhwc_, params_[0].grad(), DType::f32, false, w_dims_);
    if (bias_) bias_grad(dy);
    if (dx)
      DLPERF_CHECK(cudnnConvolutionBackwardData(ctx_->cudnn, &one, w_desc_, params_[0].compute(), y_desc_, dev(dy).data(),
                                                bwd_data_desc_, bwd_data_algo_, ctx_->workspace.get(), ctx_->workspace.bytes(), &zero,
                                                x_desc_, dev(*dx).data()));
  }

 private:
  void plan_algorithms(const std::string& name) {
    const cudnnHandle_t h = ctx_->cudnn;
    size_t ws = 0, bytes = 0;
    int count = 0, got = 0;
    {
      DLPERF_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, fwd_desc_, y_desc_, count, &got, found.data()));
      const auto& p = pick(found, got, false, "the forward convolution " + name);
      fwd_algo_ = p.algo;
      DLPERF_CHECK(cudnnSetConvolutionMathType(fwd_desc_, p.mathType));
      DLPERF_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, fwd_desc_, y_desc_, fwd_algo_, &bytes));
      ws = std::max(ws, bytes);
    }
    {
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, bwd_data_desc_, x_desc_, count, &got, found.data()));
      const auto& p = pick(found, got, true, "the backward-data convolution " + name);
      bwd_data_algo_ = p.algo;
      DLPERF_CHECK(cudnnSetConvolutionMathType(bwd_data_desc_, p.mathType));
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, bwd_data_desc_, x_desc_, bwd_data_algo_, &bytes));
      ws = std::max(ws, bytes);
    }
    {
      DLPERF_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, bwd_filter_desc_, w_desc_, count, &got, found.data()));
      const auto& p = pick(found, got, true, "the backward-filter convolution " + name);
      bwd_filter_algo_ = p.algo;
      DLPERF_CHECK(cudnnSetConvolutionMathType(bwd_filter_desc_, p.mathType));
      DLPERF_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, bwd_filter_desc_, w_desc_, bwd_filter_algo_,
                                                                  &bytes));
      ws = std::max(ws, bytes);
    }
    ctx_->workspace.reserve(ws);
  }

  // db (Cout) = sum of dy over N, H, W, as GEMMs against ones (deterministic, f32 result).
  void bias_grad(const Tensor& dy) {
    const int64_t n = y_dims_[0], c = y_dims_[1], hw = y_dims_[2] * y_dims_[3];
    float* db = params_[1].grad();
    if (nhwc_) {
      column_sums(*ctx_, dev(dy).data(), dtype_, n * hw, c, db);  // (N*H*W, C)
    } else {
      row_sums(*ctx_, dev(dy).data(), dtype_, n * c, hw, bias_rows_.as<float>());  // (N*C, H*W) -> (N, C)
      column_sums(*ctx_, bias_rows_.get(), DType::f32, n, c, db);
    }
  }

  Ctx ctx_;
  DType dtype_ = DType::f32;
  bool nhwc_ = false;
  bool bias_ = false;
  bool dw_via_scratch_ = false;
  Dims y_dims_, w_dims_;
  TensorDesc x_desc_, y_desc_;
  FilterDesc w_desc_;
  ConvDesc fwd_desc_, bwd_data_desc_, bwd_filter_desc_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  DeviceMemory bias_rows_;  // (N, Cout) f32: per-image bias sums of NCHW gradients
};

}  // namespace

std::unique_ptr<Conv2d> make_conv2d(Ctx ctx, const Conv2dSpec& s, const Tensor& x) {
  return std::make_unique<CudaConv2d>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
