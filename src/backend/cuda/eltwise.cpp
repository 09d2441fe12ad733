// Elementwise ops (kernels in eltwise.cu): ReLU / GELU / tanh activations, and the residual add
// with its optional fused ReLU, whose backward masks with the saved output
// (relu'(a + b) = [y > 0]). Any shape and layout: input and output share one.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

ActKind act_kind(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu: return ActKind::relu;
    case ActivationKind::gelu: return ActKind::gelu;
    case ActivationKind::tanh: return ActKind::tanh;
  }
  return ActKind::relu;
}

class CudaActivation final : public Activation {
 public:
  CudaActivation(Ctx ctx, ActivationKind kind, const CudaTensor& x)
      : ctx_(std::move(ctx)), kind_(act_kind(kind)), dims_(x.dims()), dtype_(x.dtype()),
        layout_(x.layout()) {}
  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, dims_, dtype_, layout_); }
  void forward(const Tensor& x, Tensor& y) override {
    DLPERF_CHECK(launch_activation_forward(kind_, dev(x).data(), dev(y).data(), elem(dtype_), x.numel(), ctx_->s()));
  }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    DLPERF_CHECK(launch_activation_backward(kind_, dev(x).data(), dev(dy).data(), dev(dx).data(), elem(dtype_), x.numel(), ctx_->s()));
  }

 private:
  Ctx ctx_;
  ActKind kind_;
  Dims dims_;
  DType dtype_;
  Layout layout_;
};

class CudaAdd final : public Add {
 public:
  CudaAdd(Ctx ctx, const CudaTensor& a, bool fuse_relu) : ctx_(std::move(ctx)), fuse_relu_(fuse_relu), dtype_(a.dtype()) {}
  void forward(const Tensor& a, const Tensor& b, Tensor& y) override {
    DLPERF_ASSERT(a.numel() == b.numel() && a.numel() == y.numel() && dev(a).layout() == dev(b).layout(), "add of one shape and layout");
    DLPERF_CHECK(launch_add(dev(a).data(), dev(b).data(), dev(y).data(), elem(dtype_), a.numel(), fuse_relu_, ctx_->s()));
  }
  void backward_relu(const Tensor& y, const Tensor& dy, Tensor& d) override {
    DLPERF_ASSERT(fuse_relu_, "backward_relu on an add planned without ReLU");
    DLPERF_CHECK(launch_relu_backward_from_y(dev(y).data(), dev(dy).data(), dev(d).data(), elem(dtype_), y.numel(), ctx_->s()));
  }

 private:
  Ctx ctx_;
  bool fuse_relu_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<Activation> make_activation(Ctx ctx, ActivationKind kind, const Tensor& x) {
  return std::make_unique<CudaActivation>(std::move(ctx), kind, dev(x));
}

// Every CUDA op keeps its input's layout, so the two inputs of an add always share one; a
// mismatch is a model bug, caught at plan time.
std::unique_ptr<Add> make_add(Ctx ctx, const Tensor& a, const Tensor& b, bool fuse_relu) {
  if (!a.same_layout(b)) throw_usage_error("add: " + to_string(a.dims()) + " and " + to_string(b.dims()) + " differ in shape or layout");
  return std::make_unique<CudaAdd>(std::move(ctx), dev(a), fuse_relu);
}

}  // namespace dlperf::cuda
