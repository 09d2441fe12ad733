// Fully connected layer on oneDNN's inner product: y = x W^T + b, with the same
// master/compute weight scheme as convolution (f32 gradients in every precision).
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuLinear final : public WithParams<Linear> {
 public:
  CpuLinear(Ctx ctx, const LinearSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), bias_(s.bias), dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.in_features)
      throw_usage_error("linear " + s.name + ": input " + to_string(xd) + " is not (M, " + std::to_string(s.in_features) + ")");
    y_dims_ = {xd[0], s.out_features};
    const Dims w_dims = {s.out_features, s.in_features};
    const md x_md = x.desc(), w_any = any_md(w_dims, dtype_), y_md = plain_md(y_dims_, dtype_);
    const md b_md = plain_md({s.out_features}, DType::f32);
    auto fd = s.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, x_md, w_any, b_md, y_md)
                     : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, x_md, w_any, y_md);
    fwd_pd_ = dnnl::inner_product_forward::primitive_desc(fd, ctx_->engine);
    const md dw_md = dtype_ == DType::f32 ? fwd_pd_.weights_desc() : any_md(w_dims, DType::f32);
    auto wd = s.bias ? dnnl::inner_product_backward_weights::desc(x_md, dw_md, b_md, y_md)
                     : dnnl::inner_product_backward_weights::desc(x_md, dw_md, y_md);
    bwd_w_pd_ = dnnl::inner_product_backward_weights::primitive_desc(wd, ctx_->engine, fwd_pd_);
    bwd_d_pd_ = dnnl::inner_product_backward_data::primitive_desc(
        dnnl::inner_product_backward_data::desc(x_md, w_any, y_md), ctx_->engine, fwd_pd_);
    fwd_ = dnnl::inner_product_forward(fwd_pd_);
    bwd_w_ = dnnl::inner_product_backward_weights(bwd_w_pd_);
    bwd_d_ = dnnl::inner_product_backward_data(bwd_d_pd_);
    Param& w = add_param(ctx_, s.name + ".weight", ParamRole::weight, w_dims, bwd_w_pd_.diff_weights_desc());
    fwd_view_ = w.add_view(fwd_pd_.weights_desc());
    bwd_view_ = w.add_view(bwd_d_pd_.weights_desc());
    if (s.bias) add_param(ctx_, s.name + ".bias", ParamRole::bias, {s.out_features}, b_md);
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, y_dims_, dtype_, fwd_pd_.dst_desc()); }

  void forward(const Tensor& x, Tensor& y) override {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, cpu(x).mem()}, {DNNL_ARG_WEIGHTS, params_[0].view(fwd_view_)}, {DNNL_ARG_DST, cpu(y).mem()}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, params_[1].value());
    fwd_.execute(ctx_->stream, args);
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    std::unordered_map<int, dnnl::memory> wargs{
        {DNNL_ARG_SRC, cpu(x).mem()}, {DNNL_ARG_DIFF_DST, cpu(dy).mem()}, {DNNL_ARG_DIFF_WEIGHTS, params_[0].grad()}};
    if (bias_) wargs.emplace(DNNL_ARG_DIFF_BIAS, params_[1].grad());
    bwd_w_.execute(ctx_->stream, wargs);
    if (dx)
      bwd_d_.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, cpu(dy).mem()},
                                    {DNNL_ARG_WEIGHTS, params_[0].view(bwd_view_)},
                                    {DNNL_ARG_DIFF_SRC, cpu(*dx).mem()}});
  }

 private:
  Ctx ctx_;
  bool bias_;
  size_t fwd_view_ = 0, bwd_view_ = 0;
  DType dtype_;
  Dims y_dims_;
  dnnl::inner_product_forward::primitive_desc fwd_pd_;
  dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::inner_product_backward_data::primitive_desc bwd_d_pd_;
  dnnl::inner_product_forward fwd_;
  dnnl::inner_product_backward_weights bwd_w_;
  dnnl::inner_product_backward_data bwd_d_;
};

}  // namespace

std::unique_ptr<Linear> make_linear(Ctx ctx, const LinearSpec& s, const Tensor& x) {
  return std::make_unique<CpuLinear>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
