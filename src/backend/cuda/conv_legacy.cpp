// Convolutions on cuDNN's legacy API: the fallback of the graph-API path (conv_plan.h).
// Each direction has its own convolution descriptor, because each carries its algorithm's
// math type. The math type is set *before* the heuristics are asked (Context::conv_math): with
// CUDNN_DEFAULT_MATH on f16/bf16 data, cuDNN's heuristics rule tensor-core kernels out and
// return the FMA fallbacks (measured on an H100, issue 11: ResNet-50 fp16 549 -> 2,949 img/s
// from this alone). Under --precision fp32 the descriptors stay CUDNN_FMA_MATH whatever the
// heuristics say, so no TF32 kernel runs. Backward algorithms are deterministic under
// --deterministic (conv_plan.h).
#include <vector>

#include "backend/cuda/conv_plan.h"

namespace dlperf::cuda {
namespace {

constexpr size_t kWorkspaceLimit = size_t{1} << 30;  // per algorithm; the shared workspace is the max

template <class Perf>
// The heuristics' first algorithm that ran, fits the workspace, obeys the math rule and, under
// --deterministic, is deterministic (the graph path's rule: a nondeterministic one is never
// accepted silently there either).
const Perf* pick(const std::vector<Perf>& found, int count, bool need_deterministic, bool strict_f32) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = found[static_cast<size_t>(i)];
    const bool det_ok = !need_deterministic || p.determinism == CUDNN_DETERMINISTIC;
    const bool math_ok = !strict_f32 || p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= kWorkspaceLimit && det_ok && math_ok) return &p;
  }
  return nullptr;
}

class LegacyConv final : public ConvRunner {
 public:
  LegacyConv(Context& ctx, const ConvShape& s, ConvDir d) : dir_(d) {
    set_4d(x_, s.dtype, s.nhwc, s.n, s.c, s.h, s.w);
    set_4d(y_, s.dtype, s.nhwc, s.n, s.k, s.ho, s.wo);
    DLPERF_CHECK(cudnnSetFilter4dDescriptor(w_, cudnn_type(s.dtype), s.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, static_cast<int>(s.k),
                                            static_cast<int>(s.c), static_cast<int>(s.r), static_cast<int>(s.r)));
    const int pad = static_cast<int>(s.pad), st = static_cast<int>(s.stride);
    DLPERF_CHECK(cudnnSetConvolution2dDescriptor(conv_, pad, pad, st, st, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    const cudnnMathType_t math = ctx.conv_math(s.dtype);
    DLPERF_CHECK(cudnnSetConvolutionMathType(conv_, math));
    const bool strict_f32 = math == CUDNN_FMA_MATH;
    const cudnnHandle_t h = ctx.cudnn;
    const std::string what = std::string("the legacy ") + dir_name(d) + " convolution " + s.key();
    int count = 0, got = 0;
    cudnnMathType_t chosen = math;
    if (d == ConvDir::fwd) {
      DLPERF_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_, w_, conv_, y_, count, &got, found.data()));
      const auto* p = pick(found, got, false, strict_f32);
      if (!p) throw Error(ErrorKind::library, "cuDNN has no algorithm for " + what);
      fwd_ = p->algo, chosen = p->mathType, algo_ = static_cast<int>(p->algo);
    } else if (d == ConvDir::bwd_data) {
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_, y_, conv_, x_, count, &got, found.data()));
      const auto* p = pick(found, got, needs_determinism(ctx, d), strict_f32);
      if (!p) throw Error(ErrorKind::library, "cuDNN has no usable algorithm for " + what);
      bwd_data_ = p->algo, chosen = p->mathType, algo_ = static_cast<int>(p->algo);
      nondeterministic_ = p->determinism != CUDNN_DETERMINISTIC;
    } else {
      DLPERF_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> found(static_cast<size_t>(count));
      DLPERF_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_, y_, conv_, w_, count, &got, found.data()));
      const auto* p = pick(found, got, needs_determinism(ctx, d), strict_f32);
      if (!p) throw Error(ErrorKind::library, "cuDNN has no usable algorithm for " + what);
      bwd_filter_ = p->algo, chosen = p->mathType, algo_ = static_cast<int>(p->algo);
      nondeterministic_ = p->determinism != CUDNN_DETERMINISTIC;
    }
    // The heuristics' math type for the chosen algorithm, except that fp32 stays FMA.
    DLPERF_CHECK(cudnnSetConvolutionMathType(conv_, strict_f32 ? CUDNN_FMA_MATH : chosen));
    // The heuristics list each algorithm once per math type it runs under: TENSOR_OP (and
    // ALLOW_CONVERSION) entries are tensor-core kernels; DEFAULT on f32 data permits TF32 only
    // under --precision tf32. A DEFAULT entry on f16/bf16 data is counted as CUDA cores (the
    // conservative reading: it is then flagged as a reference kernel).
    const bool tc = !strict_f32 && (chosen == CUDNN_TENSOR_OP_MATH || chosen == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                                    (chosen == CUDNN_DEFAULT_MATH && s.dtype == DType::f32 && ctx.tf32()));
    units_ = tc ? MathUnits::tensor_cores : MathUnits::cuda_cores;
    if (d == ConvDir::fwd)
      DLPERF_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_, w_, conv_, y_, fwd_, &ws_));
    else if (d == ConvDir::bwd_data)
      DLPERF_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_, y_, conv_, x_, bwd_data_, &ws_));
    else
      DLPERF_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_, y_, conv_, w_, bwd_filter_, &ws_));
  }

  std::string name() const override {
    return "cudnn_legacy algo " + std::to_string(algo_) + (nondeterministic_ ? " nondeterministic" : "");
  }
  MathUnits units() const override { return units_; }
  size_t workspace() const override { return ws_; }

  void run(Context& ctx, const void* a, const void* b, void* out) override {
    const float one = 1.0f, zero = 0.0f;
    void* ws = ctx.workspace.get();
    const size_t bytes = ctx.workspace.bytes();
    switch (dir_) {
      case ConvDir::fwd:
        DLPERF_CHECK(cudnnConvolutionForward(ctx.cudnn, &one, x_, a, w_, b, conv_, fwd_, ws, bytes, &zero, y_, out));
        break;
      case ConvDir::bwd_data:
        DLPERF_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &one, w_, b, y_, a, conv_, bwd_data_, ws, bytes, &zero, x_, out));
        break;
      case ConvDir::bwd_filter:
        DLPERF_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &one, x_, a, y_, b, conv_, bwd_filter_, ws, bytes, &zero, w_, out));
        break;
    }
  }

 private:
  ConvDir dir_;
  TensorDesc x_, y_;
  FilterDesc w_;
  ConvDesc conv_;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  int algo_ = 0;
  bool nondeterministic_ = false;  // allowed without --deterministic; named in --plan-only
  MathUnits units_ = MathUnits::cuda_cores;
  size_t ws_ = 0;
};

}  // namespace

std::unique_ptr<ConvRunner> make_legacy_conv(Context& ctx, const ConvShape& s, ConvDir d) {
  return std::make_unique<LegacyConv>(ctx, s, d);
}

}  // namespace dlperf::cuda
