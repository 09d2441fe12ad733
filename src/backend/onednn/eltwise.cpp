// Elementwise ops on oneDNN: activations (ReLU, GELU-erf, tanh) and the residual add, whose ReLU
// is fused as a post-op; its backward masks with the saved output (relu'(y) = [y > 0]).
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

const char* name_of(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu: return "relu";
    case ActivationKind::gelu: return "gelu";
    case ActivationKind::tanh: return "tanh";
  }
  return "activation";
}

dnnl::algorithm algorithm_of(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu: return dnnl::algorithm::eltwise_relu;
    case ActivationKind::gelu: return dnnl::algorithm::eltwise_gelu_erf;
    case ActivationKind::tanh: return dnnl::algorithm::eltwise_tanh;
  }
  return dnnl::algorithm::undef;
}

class CpuActivation final : public Activation {
 public:
  CpuActivation(Ctx ctx, ActivationKind kind, const CpuTensor& x) : ctx_(std::move(ctx)), dims_(x.dims()), dtype_(x.dtype()) {
    const auto alg = algorithm_of(kind);
    fwd_pd_ = compat::eltwise_forward(ctx_->engine, alg, x.desc());
    bwd_pd_ = compat::eltwise_backward(ctx_->engine, alg, x.desc(), fwd_pd_);
    fwd_ = dnnl::eltwise_forward(fwd_pd_);
    bwd_ = dnnl::eltwise_backward(bwd_pd_);
    record_kernel(*ctx_, name_of(kind), "forward", shape_of(dims_, dtype_), fwd_pd_);
    record_kernel(*ctx_, name_of(kind), "backward", shape_of(dims_, dtype_), bwd_pd_);
  }
  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, dims_, dtype_, fwd_pd_.dst_desc()); }
  void forward(const Tensor& x, Tensor& y) override {
    fwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, cpu(x).mem()}, {DNNL_ARG_DST, cpu(y).mem()}});
  }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    bwd_.execute(ctx_->stream,
                 {{DNNL_ARG_SRC, cpu(x).mem()}, {DNNL_ARG_DIFF_DST, cpu(dy).mem()}, {DNNL_ARG_DIFF_SRC, cpu(dx).mem()}});
  }

 private:
  Ctx ctx_;
  Dims dims_;
  DType dtype_;
  dnnl::eltwise_forward::primitive_desc fwd_pd_;
  dnnl::eltwise_backward::primitive_desc bwd_pd_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
};

class CpuAdd final : public Add {
 public:
  CpuAdd(Ctx ctx, const CpuTensor& a, const CpuTensor& b, bool fuse_relu) : ctx_(std::move(ctx)), fuse_relu_(fuse_relu) {
    dnnl::primitive_attr attr;
    if (fuse_relu) {
      dnnl::post_ops po;
      compat::append_eltwise(po, dnnl::algorithm::eltwise_relu);
      attr.set_post_ops(po);
    }
    const md a_md = a.desc();
    const auto fwd_pd = compat::binary(ctx_->engine, dnnl::algorithm::binary_add, a_md, b.desc(), a_md, attr);
    fwd_ = dnnl::binary(fwd_pd);
    const char* op = fuse_relu ? "add_relu" : "add";
    record_kernel(*ctx_, op, "forward", shape_of(a.dims(), a.dtype()), fwd_pd);
    if (fuse_relu) {
      const auto bwd_pd = compat::eltwise_backward(ctx_->engine, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, a_md);
      relu_bwd_ = dnnl::eltwise_backward(bwd_pd);
      record_kernel(*ctx_, op, "backward", shape_of(a.dims(), a.dtype()), bwd_pd);
    }
  }
  void forward(const Tensor& a, const Tensor& b, Tensor& y) override {
    fwd_.execute(ctx_->stream, {{DNNL_ARG_SRC_0, cpu(a).mem()}, {DNNL_ARG_SRC_1, cpu(b).mem()}, {DNNL_ARG_DST, cpu(y).mem()}});
  }
  void backward_relu(const Tensor& y, const Tensor& dy, Tensor& d) override {
    DLPERF_ASSERT(fuse_relu_, "backward_relu on an add planned without ReLU");
    relu_bwd_.execute(ctx_->stream,
                      {{DNNL_ARG_DST, cpu(y).mem()}, {DNNL_ARG_DIFF_DST, cpu(dy).mem()}, {DNNL_ARG_DIFF_SRC, cpu(d).mem()}});
  }

 private:
  Ctx ctx_;
  bool fuse_relu_;
  dnnl::binary fwd_;
  dnnl::eltwise_backward relu_bwd_;
};

}  // namespace

std::unique_ptr<Activation> make_activation(Ctx ctx, ActivationKind kind, const Tensor& x) {
  return std::make_unique<CpuActivation>(std::move(ctx), kind, cpu(x));
}

std::unique_ptr<Add> make_add(Ctx ctx, const Tensor& a, const Tensor& b, bool fuse_relu) {
  if (a.dims() != b.dims()) throw_usage_error("add: " + to_string(a.dims()) + " + " + to_string(b.dims()) + " differ");
  return std::make_unique<CpuAdd>(std::move(ctx), cpu(a), cpu(b), fuse_relu);
}

}  // namespace dlperf::onednn
