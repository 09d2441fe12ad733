// Max/average pooling and global average pooling. Channels-last max pooling runs dlperf's own
// kernels (pooling.cu: forward keeps each maximum's place, backward gathers from it; cuDNN's
// NHWC backward was 19 of VGG16 fp16's 45 ms on an H200). The rest is cuDNN:
// cudnnPoolingBackward needs the forward's x and y, so the op keeps their addresses from the
// last forward (callers keep both alive until backward, as every model does). Max pooling
// uses cuDNN's deterministic mode; average pooling excludes padding from the divisor, as the
// interface asks.
// Global average pooling is a pooling over the whole H x W window into (N, C, 1, 1), which is
// the same memory as the plain (N, C) matrix in either layout.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

// The planned cuDNN pooling shared by both ops: y (N, C, Ho, Wo) in x's layout.
class Pooling {
 public:
  Pooling(Ctx ctx, const CudaTensor& x, PoolKind kind, int64_t kh, int64_t kw, int64_t stride, int64_t pad) : ctx_(std::move(ctx)) {
    const Dims& xd = x.dims();
    if (xd.size() != 4) throw_usage_error("pool2d: input " + to_string(xd) + " is not (N, C, H, W)");
    const int64_t ho = (xd[2] + 2 * pad - kh) / stride + 1, wo = (xd[3] + 2 * pad - kw) / stride + 1;
    if (ho < 1 || wo < 1) throw_usage_error("pool2d: input " + to_string(xd) + " is smaller than the pooling window");
    dtype_ = x.dtype();
    nhwc_ = x.nhwc();
    y_dims_ = {xd[0], xd[1], ho, wo};
    set_4d(x_desc_, dtype_, nhwc_, xd[0], xd[1], xd[2], xd[3]);
    set_4d(y_desc_, dtype_, nhwc_, xd[0], xd[1], ho, wo);
    const auto mode = kind == PoolKind::max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    DLPERF_CHECK(cudnnSetPooling2dDescriptor(desc_, mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(kh), static_cast<int>(kw),
                                             static_cast<int>(pad), static_cast<int>(pad), static_cast<int>(stride),
                                             static_cast<int>(stride)));
    int n = 0, c = 0, h = 0, w = 0;
    DLPERF_CHECK(cudnnGetPooling2dForwardOutputDim(desc_, x_desc_, &n, &c, &h, &w));
    DLPERF_ASSERT(n == xd[0] && c == xd[1] && h == ho && w == wo, "cuDNN agrees on the pooled shape");
    if (kind == PoolKind::max && nhwc_ && kh == kw) {
      shape_.n = xd[0];
      shape_.c = static_cast<int>(xd[1]), shape_.h = static_cast<int>(xd[2]), shape_.w = static_cast<int>(xd[3]);
      shape_.ho = static_cast<int>(ho), shape_.wo = static_cast<int>(wo);
      shape_.k = static_cast<int>(kh), shape_.stride = static_cast<int>(stride), shape_.pad = static_cast<int>(pad);
      if (max_pool_nhwc_supported(shape_)) places_ = ctx_->alloc(static_cast<size_t>(product(y_dims_)));
    }
  }

  const Dims& y_dims() const { return y_dims_; }
  DType dtype() const { return dtype_; }
  bool nhwc() const { return nhwc_; }

  void forward(const void* x, void* y) {
    if (places_.get()) {
      DLPERF_CHECK(launch_max_pool_nhwc_forward(x, y, places_.as<uint8_t>(), elem(dtype_), shape_, ctx_->s()));
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    DLPERF_CHECK(cudnnPoolingForward(ctx_->cudnn, desc_, &one, x_desc_, x, &zero, y_desc_, y));
    x_ = x;
    y_ = y;
  }
  void backward(const void* dy, void* dx) {
    if (places_.get()) {
      DLPERF_CHECK(launch_max_pool_nhwc_backward(dy, places_.as<uint8_t>(), dx, elem(dtype_), shape_, ctx_->s()));
      return;
    }
    DLPERF_ASSERT(x_ && y_, "pooling backward follows a forward");
    const float one = 1.0f, zero = 0.0f;
    DLPERF_CHECK(cudnnPoolingBackward(ctx_->cudnn, desc_, &one, y_desc_, y_, y_desc_, dy, x_desc_, x_, &zero, x_desc_, dx));
  }

 private:
  Ctx ctx_;
  DType dtype_ = DType::f32;
  bool nhwc_ = false;
  Dims y_dims_;
  TensorDesc x_desc_, y_desc_;
  PoolDesc desc_;
  const void* x_ = nullptr;  // the last forward's input and output
  const void* y_ = nullptr;
  MaxPoolShape shape_;     // channels-last max pooling on pooling.cu's kernels:
  DeviceMemory places_;    // each maximum's place in its window, written by forward (empty: cuDNN)
};

class CudaPool2d final : public Pool2d {
 public:
  CudaPool2d(Ctx ctx, const Pool2dSpec& s, const CudaTensor& x)
      : ctx_(ctx), pool_(std::move(ctx), x, s.kind, s.kernel, s.kernel, s.stride, s.padding) {}
  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, pool_.y_dims(), pool_.dtype(), pool_.nhwc() ? Layout::channels_last : Layout::canonical);
  }
  void forward(const Tensor& x, Tensor& y) override { pool_.forward(dev(x).data(), dev(y).data()); }
  void backward(const Tensor& dy, Tensor& dx) override { pool_.backward(dev(dy).data(), dev(dx).data()); }

 private:
  Ctx ctx_;
  Pooling pool_;
};

class CudaGlobalAvgPool final : public GlobalAvgPool {
 public:
  CudaGlobalAvgPool(Ctx ctx, const CudaTensor& x)
      : ctx_(ctx), pool_(std::move(ctx), x, PoolKind::avg, x.dims().at(2), x.dims().at(3), 1, 0), y_dims_{x.dims()[0], x.dims()[1]} {}
  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, y_dims_, pool_.dtype(), Layout::canonical); }
  void forward(const Tensor& x, Tensor& y) override { pool_.forward(dev(x).data(), dev(y).data()); }
  void backward(const Tensor& dy, Tensor& dx) override { pool_.backward(dev(dy).data(), dev(dx).data()); }

 private:
  Ctx ctx_;
  Pooling pool_;
  Dims y_dims_;  // (N, C)
};

}  // namespace

std::unique_ptr<Pool2d> make_pool2d(Ctx ctx, const Pool2dSpec& s, const Tensor& x) {
  return std::make_unique<CudaPool2d>(std::move(ctx), s, dev(x));
}

std::unique_ptr<GlobalAvgPool> make_global_avg_pool(Ctx ctx, const Tensor& x) {
  if (x.dims().size() != 4) throw_usage_error("global_avg_pool: input " + to_string(x.dims()) + " is not (N, C, H, W)");
  return std::make_unique<CudaGlobalAvgPool>(std::move(ctx), dev(x));
}

}  // namespace dlperf::cuda
