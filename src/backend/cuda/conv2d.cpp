// Convolution on cuDNN: forward, backward data and backward filter, planned once.
//   x (N, Cin, H, W) (x) w (Cout, Cin, k, k) -> y (N, Cout, Ho, Wo), in x's layout.
// Each direction runs on cuDNN's graph API when it has a plan for the shape on this GPU and
// cuDNN, else on the legacy API with a one-line warning (conv_plan.h); which one ran is in
// Backend::planned_kernels(). A first layer (input_grad false) plans no backward-data pass. With bias and fuse_relu (VGG), forward is one fused graph
// conv -> + bias -> ReLU where an engine supports it, else the convolution followed by one
// bias + ReLU kernel; backward masks dy with the saved output (relu'(z) = [relu(z) > 0]).
// Weights: master f32 KCRS; f16/bf16 or channels-last runs read the compute copy (KRSC for
// NHWC filters). cuDNN writes the filter gradient in the filter's own type and layout, so
// those runs convert it into the f32 KCRS gradient through the shared scratch.
#include <algorithm>
#include <array>

#include "backend/cuda/conv_plan.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

const char* pass_name(ConvDir d) {
  switch (d) {
    case ConvDir::fwd: return "forward";
    case ConvDir::bwd_data: return "backward_data";
    case ConvDir::bwd_filter: return "backward_weights";
  }
  return "?";
}

std::unique_ptr<ConvRunner> choose(Context& ctx, const std::string& name, const ConvShape& s, ConvDir d) {
  try {
    auto r = make_graph_conv(ctx, s, d);
    ctx.record_kernel(name, pass_name(d), s.key(), r->name(), r->units());
    return r;
  } catch (const Error& e) {
    auto r = make_legacy_conv(ctx, s, d);
    ctx.warn_fallback(name, pass_name(d), s.key(), r->name(), std::string("no cuDNN graph-API plan: ") + e.what(), r->units());
    return r;
  }
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

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
    shape_ = {x.dtype(), x.nhwc(), xd[0], xd[1], xd[2], xd[3], s.out_channels, s.kernel, s.stride, s.padding, ho, wo};
    // The channels-last stem (ResNet conv1, VGG features.0: 3 input channels) runs on 4
    // channels, the 4th zero, as NVIDIA's MLPerf ResNet pads it, wherever tensor cores are
    // wanted (f16, bf16, tf32): their cuDNN engines want C a multiple of 4 and have none, or
    // slow ones, for C = 3. The input and the filter copy are padded each forward, the filter
    // gradient cropped back to 3. A first layer only (no dx to crop).
    pad_ = x.nhwc() && (x.dtype() != DType::f32 || ctx_->tf32()) && xd[1] == 3 && !s.input_grad;
    if (pad_) {
      shape_.c = 4;
      const size_t e = dtype_size(x.dtype());
      x_pad_ = ctx_->alloc(static_cast<size_t>(xd[0] * xd[2] * xd[3] * 4) * e);
      w_pad_ = ctx_->alloc(static_cast<size_t>(s.out_channels * s.kernel * s.kernel * 4) * e);
    }
    dtype_ = x.dtype();
    nhwc_ = x.nhwc();
    bias_ = s.bias;
    relu_ = s.fuse_relu;
    y_dims_ = {xd[0], s.out_channels, ho, wo};
    w_dims_ = {s.out_channels, s.in_channels, s.kernel, s.kernel};

    Context& c = *ctx_;
    // Under --precision fp32 cuDNN's runtime-fusion engines (all tensor-core, TF32 on f32 data)
    // are ruled out, so the fused graph cannot plan: the convolution plus one bias + ReLU
    // kernel is the designed fp32 path there, recorded as such, not as a fallback.
    const bool try_fused = bias_ && relu_ && c.precision != Precision::fp32;
    if (bias_ && relu_ && !try_fused)
      c.record_kernel(s.name, "forward", shape_.key() + " +bias+relu", "convolution + bias_relu kernel (fp32: no TF32 fusion)",
                      MathUnits::not_matmul);
    if (try_fused) {
      try {
        fused_ = std::make_unique<ConvBiasRelu>(c, shape_);
        c.record_kernel(s.name, "forward", shape_.key() + " +bias+relu", fused_->name(), fused_->units());
      } catch (const Error& e) {
        c.warn_fallback(s.name, "forward", shape_.key() + " +bias+relu", "unfused convolution + bias_relu kernel",
                        std::string("no fused cuDNN engine: ") + e.what());
      }
    }
    if (!fused_) runners_[0] = choose(c, s.name, shape_, ConvDir::fwd);
    if (s.input_grad) runners_[1] = choose(c, s.name, shape_, ConvDir::bwd_data);  // a first layer needs no dx
    runners_[2] = choose(c, s.name, shape_, ConvDir::bwd_filter);
    size_t ws = fused_ ? fused_->workspace() : 0;
    for (const auto& r : runners_)
      if (r) ws = std::max(ws, r->workspace());
    c.workspace.reserve(ws);

    add_param(ctx_, s.name + ".weight", ParamRole::weight, w_dims_, dtype_, nhwc_);
    // The fused graph reads the bias in the compute dtype (its copy is refreshed with the weights).
    if (bias_) add_param(ctx_, s.name + ".bias", ParamRole::bias, {s.out_channels}, fused_ ? dtype_ : DType::f32);
    // Scratch: the ReLU-masked dy (fuse_relu), then dw in the filter's type and layout (when not f32 KCRS).
    dw_via_scratch_ = dtype_ != DType::f32 || nhwc_;
    masked_bytes_ = relu_ ? align256(static_cast<size_t>(product(y_dims_)) * dtype_size(dtype_)) : 0;
    size_t dw_bytes = dw_via_scratch_ ? static_cast<size_t>(product(w_dims_)) * dtype_size(dtype_) : 0;
    if (pad_) dw_bytes = align256(static_cast<size_t>(product(w_dims_) / 3 * 4) * dtype_size(dtype_)) + dw_bytes;  // (K,R,S,4) then (K,R,S,3)
    c.scratch.reserve(masked_bytes_ + dw_bytes);
    if (bias_) {
      const int64_t hw = ho * wo;
      if (nhwc_) {
        c.ones(dtype_, xd[0] * hw);
      } else {
        c.ones(dtype_, hw);
        c.ones(DType::f32, xd[0]);
        bias_rows_ = c.alloc(static_cast<size_t>(xd[0] * s.out_channels) * sizeof(float));
      }
    }
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, y_dims_, dtype_, nhwc_ ? Layout::channels_last : Layout::canonical);
  }

  void forward(const Tensor& x, Tensor& y) override {
    y_ = dev(y).data();
    const void* xin = dev(x).data();
    const void* w = params_[0].compute();
    if (pad_) {  // (N*H*W, 3) -> (N*H*W, 4) and (K*R*S, 3) -> (K*R*S, 4)
      DLPERF_CHECK(launch_copy_channels(xin, 3, x_pad_.get(), 4, x.numel() / 3, elem(dtype_), ctx_->s()));
      DLPERF_CHECK(launch_copy_channels(w, 3, w_pad_.get(), 4, product(w_dims_) / 3, elem(dtype_), ctx_->s()));
      xin = x_pad_.get();
      w = w_pad_.get();
    }
    if (fused_) {
      fused_->run(*ctx_, xin, w, params_[1].compute(), dev(y).data());
      return;
    }
    runners_[0]->run(*ctx_, xin, w, dev(y).data());
    if (bias_ || relu_) {
      const int64_t hw = y_dims_[2] * y_dims_[3];
      DLPERF_CHECK(launch_bias_relu(dev(y).data(), elem(dtype_), bias_ ? params_[1].value() : nullptr, y.numel(), y_dims_[1],
                                    nhwc_ ? 1 : hw, relu_, ctx_->s()));
    }
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    const void* g = dev(dy).data();
    if (relu_) {
      DLPERF_ASSERT(y_ != nullptr, "conv2d backward follows a forward");
      DLPERF_CHECK(launch_relu_backward_from_y(y_, g, ctx_->scratch.get(), elem(dtype_), dy.numel(), ctx_->s()));
      g = ctx_->scratch.get();
    }
    void* dw = dw_via_scratch_ ? static_cast<char*>(ctx_->scratch.get()) + masked_bytes_ : static_cast<void*>(params_[0].grad());
    if (pad_) {  // x_pad_ still holds this step's padded input; dW (K,R,S,4) cropped to (K,R,S,3)
      DLPERF_ASSERT(dx == nullptr, "a padded stem has no input gradient");
      runners_[2]->run(*ctx_, x_pad_.get(), g, dw);
      const int64_t taps = product(w_dims_) / 3;
      void* dw3 = static_cast<char*>(dw) + align256(static_cast<size_t>(taps * 4) * dtype_size(dtype_));
      DLPERF_CHECK(launch_copy_channels(dw, 4, dw3, 3, taps, elem(dtype_), ctx_->s()));
      dw = dw3;
    } else {
      runners_[2]->run(*ctx_, dev(x).data(), g, dw);
    }
    if (dw_via_scratch_) convert(*ctx_, dw, dtype_, nhwc_, params_[0].grad(), DType::f32, false, w_dims_);
    if (bias_) bias_grad(g);
    if (dx) {
      DLPERF_ASSERT(runners_[1] != nullptr, "conv2d planned without input_grad asked for dx");
      runners_[1]->run(*ctx_, g, params_[0].compute(), dev(*dx).data());
    }
  }

 private:
  // db (Cout) = sum of dy over N, H, W, as GEMMs against ones (deterministic, f32 result).
  void bias_grad(const void* dy) {
    const int64_t n = y_dims_[0], c = y_dims_[1], hw = y_dims_[2] * y_dims_[3];
    float* db = params_[1].grad();
    if (nhwc_) {
      column_sums(*ctx_, dy, dtype_, n * hw, c, db);  // (N*H*W, C)
    } else {
      row_sums(*ctx_, dy, dtype_, n * c, hw, bias_rows_.as<float>());  // (N*C, H*W) -> (N, C)
      column_sums(*ctx_, bias_rows_.get(), DType::f32, n, c, db);
    }
  }

  Ctx ctx_;
  ConvShape shape_;
  DType dtype_ = DType::f32;
  bool nhwc_ = false, bias_ = false, relu_ = false;
  bool dw_via_scratch_ = false;
  bool pad_ = false;          // the 3-channel stem under f16 / bf16 / tf32, run on 4 channels
  DeviceMemory x_pad_, w_pad_;  // (N, H, W, 4), (K, R, S, 4) in the compute dtype
  size_t masked_bytes_ = 0;
  Dims y_dims_, w_dims_;
  std::array<std::unique_ptr<ConvRunner>, 3> runners_;  // fwd (null when fused), bwd_data, bwd_filter
  std::unique_ptr<ConvBiasRelu> fused_;
  DeviceMemory bias_rows_;  // (N, Cout) f32: per-image bias sums of NCHW gradients
  const void* y_ = nullptr;  // the last forward's output (ReLU mask)
};

}  // namespace

std::unique_ptr<Conv2d> make_conv2d(Ctx ctx, const Conv2dSpec& s, const Tensor& x) {
  return std::make_unique<CudaConv2d>(std::move(ctx), s, dev(x));
}

}  // namespace dlperf::cuda
