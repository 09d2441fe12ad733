// Convolution on oneDNN: forward, backward data and backward weights, planned once.
// Activations keep the layout of the incoming tensor (usually blocked nChw16c, chosen by the
// first convolution from format_tag::any); weights keep whatever blocked layout the
// backward-weights primitive writes, so no reorder runs in the step in fp32.
// fuse_relu (VGG): the ReLU is a post-op of the forward primitive; backward first masks dy with
// the saved output (eltwise ReLU backward from dst) into a buffer of the output's layout.
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuConv2d final : public WithParams<Conv2d> {
 public:
  CpuConv2d(std::shared_ptr<Context> ctx, const Conv2dSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)) {
    const Dims& xd = x.dims();
    if (xd.size() != 4 || xd[1] != s.in_channels)
      throw_usage_error("conv2d " + s.name + ": input " + to_string(xd) + " does not have " + std::to_string(s.in_channels) + " channels");
    const int64_t ho = (xd[2] + 2 * s.padding - s.kernel) / s.stride + 1;
    const int64_t wo = (xd[3] + 2 * s.padding - s.kernel) / s.stride + 1;
    if (ho < 1 || wo < 1)
      throw_usage_error("conv2d " + s.name + ": input " + to_string(xd) + " is too small for a " + std::to_string(s.kernel) + "x" + std::to_string(s.kernel) + " kernel");
    y_dims_ = {xd[0], s.out_channels, ho, wo};
    const DType t = x.dtype();
    dtype_ = t;
    const Dims w_dims = {s.out_channels, s.in_channels, s.kernel, s.kernel};
    const dnnl::memory::dims stride = {s.stride, s.stride}, pad = {s.padding, s.padding};
    const md x_md = x.desc();
    // The output keeps a channels-last input's layout: oneDNN's brgemm convolutions (AMX, and
    // AVX512-BF16 without AMX) take NHWC in and out, but with the output left to `any` next to a
    // fixed NHWC input, oneDNN 2.6 finds no JIT kernel on CPUs without AMX and plans its
    // reference convolution (90x slower). A blocked input (nChw16c) lets the output choose.
    const bool nhwc = x_md == md(xd, to_dnnl(t), tag::nhwc);
    const md w_any = any_md(w_dims, t), y_any = nhwc ? md(y_dims_, to_dnnl(t), tag::nhwc) : any_md(y_dims_, t);
    const md b_md = plain_md({s.out_channels}, DType::f32);

    dnnl::primitive_attr attr;
    if (s.fuse_relu) {
      dnnl::post_ops po;
      compat::append_eltwise(po, dnnl::algorithm::eltwise_relu);
      attr.set_post_ops(po);
    }
    fwd_pd_ = compat::conv_forward(ctx_->engine, x_md, w_any, s.bias ? b_md : md{}, y_any, stride, pad, attr);
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    const std::string shape = shape_of(xd, t) + " k" + std::to_string(s.kernel) + "/" + std::to_string(s.stride) + " -> " +
                              std::to_string(s.out_channels);
    record_kernel(*ctx_, s.name, "forward", shape, fwd_pd_);

    // Gradients are f32 whatever the compute dtype (bf16 src/diff_dst, f32 diff_weights).
    const md dw_md = t == DType::f32 ? fwd_pd_.weights_desc() : any_md(w_dims, DType::f32);
    bwd_w_pd_ = compat::conv_backward_weights(ctx_->engine, x_md, dw_md, s.bias ? b_md : md{}, fwd_pd_.dst_desc(), stride, pad, fwd_pd_);
    if (is_reference_impl(bwd_w_pd_.impl_info_str())) plan_plain_backward_weights(s, xd, w_dims, b_md, stride, pad);
    bwd_w_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    record_kernel(*ctx_, s.name, "backward_weights", shape, bwd_w_pd_);

    Param& w = add_param(ctx_, s.name + ".weight", ParamRole::weight, w_dims, bwd_w_pd_.diff_weights_desc());
    fwd_view_ = w.add_view(fwd_pd_.weights_desc());
    // Backward data picks its own weight layout (its jit kernels want OIhw16o16i, not forward's).
    // A first layer needs none, and none is planned: for a 3-channel input oneDNN has only its
    // reference kernel.
    input_grad_ = s.input_grad;
    if (input_grad_) {
      bwd_d_pd_ = compat::conv_backward_data(ctx_->engine, x_md, w_any, fwd_pd_.dst_desc(), stride, pad, fwd_pd_);
      bwd_d_ = dnnl::convolution_backward_data(bwd_d_pd_);
      DLPERF_ASSERT(bwd_d_pd_.diff_src_desc() == x_md && bwd_d_pd_.diff_dst_desc() == fwd_pd_.dst_desc(), "conv backward data keeps layouts");
      record_kernel(*ctx_, s.name, "backward_data", shape, bwd_d_pd_);
      bwd_view_ = w.add_view(bwd_d_pd_.weights_desc());
    }
    if (s.bias) add_param(ctx_, s.name + ".bias", ParamRole::bias, {s.out_channels}, b_md);
    bias_ = s.bias;
    if (s.fuse_relu) {
      const md y_md = fwd_pd_.dst_desc();
      const auto relu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
      const auto pd = compat::eltwise_backward(ctx_->engine, relu, y_md);
      relu_bwd_ = dnnl::eltwise_backward(pd);
      record_kernel(*ctx_, s.name, "backward_relu", shape, pd);
      masked_ = ChargedMemory(*ctx_, y_md);
    }
  }

  TensorPtr make_output() const override {
    return std::make_unique<CpuTensor>(ctx_, y_dims_, dtype_, fwd_pd_.dst_desc());
  }

  void forward(const Tensor& x, Tensor& y) override {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, cpu(x).mem()}, {DNNL_ARG_WEIGHTS, params_[0].view(fwd_view_)}, {DNNL_ARG_DST, cpu(y).mem()}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, params_[1].value());
    fwd_.execute(ctx_->stream, args);
    y_ = cpu(y).mem();
  }

  void backward(const Tensor& x, const Tensor& dy_in, Tensor* dx) override {
    dnnl::memory dy = cpu(dy_in).mem();
    if (masked_) {  // relu'(z) = [relu(z) > 0]: the saved output gives the mask
      DLPERF_ASSERT(static_cast<bool>(y_), "conv2d backward follows a forward");
      relu_bwd_.execute(ctx_->stream, {{DNNL_ARG_DST, y_}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, masked_}});
      dy = masked_;
    }
    dnnl::memory src = cpu(x).mem(), dyw = dy;
    if (x_to_plain_.needed()) {
      x_to_plain_.run(*ctx_, src, x_plain_);
      src = x_plain_;
    }
    if (dy_to_plain_.needed()) {
      dy_to_plain_.run(*ctx_, dy, dy_plain_);
      dyw = dy_plain_;
    }
    std::unordered_map<int, dnnl::memory> wargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dyw}, {DNNL_ARG_DIFF_WEIGHTS, params_[0].grad()}};
    if (bias_) wargs.emplace(DNNL_ARG_DIFF_BIAS, params_[1].grad());
    bwd_w_.execute(ctx_->stream, wargs);
    if (dx) {
      DLPERF_ASSERT(input_grad_, "conv2d planned without input_grad asked for dx");
      bwd_d_.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, dy},
                                    {DNNL_ARG_WEIGHTS, params_[0].view(bwd_view_)},
                                    {DNNL_ARG_DIFF_SRC, cpu(*dx).mem()}});
    }
  }

 private:
  // oneDNN's JIT backward-weights pass in the blocked layouts has no kernel for a filter wider
  // than its input on AVX2 (oneDNN 2.6 on AMD Zen 3: a 3x3 filter over a 2x2 input, ResNet's
  // last stage at 32x32 images, plans ref:any), where its GEMM convolution in the plain layout
  // (x64:gemm:jit) has one. Where the blocked pass is a reference kernel, the plain one is
  // planned and the input and the output gradient are reordered into it each backward (planned
  // once, recorded); the weight gradient keeps the layout that pass writes, and forward reads
  // the weights through a view. Kept only where it is not a reference kernel too.
  void plan_plain_backward_weights(const Conv2dSpec& s, const Dims& xd, const Dims& w_dims, const md& b_md,
                                   const dnnl::memory::dims& stride, const dnnl::memory::dims& pad) {
    const DType t = dtype_;
    const md x_plain(xd, to_dnnl(t), tag::nchw), dy_plain(y_dims_, to_dnnl(t), tag::nchw);
    auto plain = compat::conv_backward_weights(ctx_->engine, x_plain, any_md(w_dims, DType::f32), s.bias ? b_md : md{}, dy_plain, stride,
                                               pad, fwd_pd_);
    if (is_reference_impl(plain.impl_info_str())) return;
    bwd_w_pd_ = plain;
    x_to_plain_ = PlannedReorder(*ctx_, fwd_pd_.src_desc(), x_plain, s.name + ".input");
    dy_to_plain_ = PlannedReorder(*ctx_, fwd_pd_.dst_desc(), dy_plain, s.name + ".output_grad");
    if (x_to_plain_.needed()) x_plain_ = ChargedMemory(*ctx_, x_plain);
    if (dy_to_plain_.needed()) dy_plain_ = ChargedMemory(*ctx_, dy_plain);
  }

  std::shared_ptr<Context> ctx_;
  Dims y_dims_;
  DType dtype_;
  bool bias_ = false, input_grad_ = true;
  size_t fwd_view_ = 0, bwd_view_ = 0;  // weight layouts of forward and backward data
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_d_pd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_weights bwd_w_;
  dnnl::convolution_backward_data bwd_d_;
  dnnl::eltwise_backward relu_bwd_;  // fuse_relu
  ChargedMemory masked_;             // fuse_relu: masked dy
  PlannedReorder x_to_plain_, dy_to_plain_;  // backward weights in the plain layout (plan_plain_backward_weights)
  ChargedMemory x_plain_, dy_plain_;
  dnnl::memory y_;                   // the last forward's output
};

}  // namespace

std::unique_ptr<Conv2d> make_conv2d(std::shared_ptr<Context> ctx, const Conv2dSpec& s, const Tensor& x) {
  return std::make_unique<CpuConv2d>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
