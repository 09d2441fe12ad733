// Fully connected layer on oneDNN's matmul: y (M, out) = x (M, in) W^T + b, W (out, in).
//
//   forward        y  (M, out) = x  (M, in)  . W^T (in, out)    W^T: strides of W's storage
//   backward data  dx (M, in)  = dy (M, out) . W   (out, in)
//   backward wts   dW (out, in) = dy^T (out, M) . x (M, in)     dy^T: strides of dy's storage
//   bias           db (1, out) = ones (1, M) . dy: the column sums of dy
//
// Why matmul and not inner product: oneDNN 2.6's inner-product backward-weights kernels run far
// below the machine's peak at BERT's shapes (M = 2048, fp32: 81 to 177 GFLOP/s against the
// forward's 300; it was the largest single cost of a BERT step), while matmul's brgemm kernels,
// given dy^T as strides, reach the forward's rate. The weight stays one plain (out, in) matrix,
// which is also the f32 master layout: fp32 runs read the master values directly (one exception
// below), bf16 runs one f32 -> bf16 conversion per step, shared by forward and backward data
// (inner product wanted two). Gradients are f32 in every precision.
#include <algorithm>

#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuLinear final : public WithParams<Linear> {
 public:
  CpuLinear(Ctx ctx, const LinearSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), bias_(s.bias), dtype_(x.dtype()) {
    const Dims& xd = x.dims();
    if (xd.size() != 2 || xd[1] != s.in_features)
      throw_usage_error("linear " + s.name + ": input " + to_string(xd) + " is not (M, " + std::to_string(s.in_features) + ")");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("linear " + s.name + ": f32 or bf16 data only");
    m_ = xd[0], k_ = s.in_features, n_ = s.out_features;
    const dt t = to_dnnl(dtype_);
    x_md_ = x.desc();
    y_md_ = md({m_, n_}, t, tag::ab);
    w_md_ = md({n_, k_}, t, tag::ab);                           // W (out, in)
    wt_md_ = md({k_, n_}, t, dnnl::memory::dims{1, k_});        // W^T over W's storage
    dyt_md_ = md({n_, m_}, t, dnnl::memory::dims{1, n_});       // dy^T over dy's storage
    dw_md_ = md({n_, k_}, dt::f32, tag::ab);
    b_md_ = md({1, n_}, dt::f32, tag::ab);
    const auto& eng = ctx_->engine;
    const auto fwd_pd = compat::matmul(eng, x_md_, wt_md_, s.bias ? b_md_ : md{}, y_md_);
    fwd_ = dnnl::matmul(fwd_pd);
    const std::string shape = shape_of(xd, dtype_) + " -> " + std::to_string(n_);
    record_kernel(*ctx_, s.name, "forward", shape, fwd_pd);
    // fp32 brgemm runs at about half rate when its plain B operand is wider than the other
    // operand's rows: dW = dy^T x with x (M, in), and dx = dy W with W (out, in), when in > out
    // (BERT's output.dense, in 3072, out 768, M 2048: 67 ms against 33). There matmul picks B's
    // layout and the operand is reordered into it: x per call (a few ms), W once per step. That
    // pays only with many rows to spread the reorders over; with few (VGG's classifier, M = 16)
    // the products are bound by reading W and a per-step reorder of W would cost more than it
    // saves. bf16 (AMX) kernels show no such loss and read the plain operands.
    constexpr int64_t kMinRowsToBlock = 256;
    const bool blocked_b = dtype_ == DType::f32 && k_ > n_ && m_ >= kMinRowsToBlock;
    const auto bwd_w_pd = compat::matmul(eng, dyt_md_, blocked_b ? md({m_, k_}, t, tag::any) : x_md_, dw_md_);
    bwd_w_ = dnnl::matmul(bwd_w_pd);
    record_kernel(*ctx_, s.name, "backward_weights", shape, bwd_w_pd);
    if (s.add_grads) {  // dW += dy^T x: the same product with a sum post-op
      if (s.bias) throw_usage_error("linear " + s.name + ": adding gradients needs a bias-free layer");
      const auto add_pd = compat::matmul(eng, bwd_w_pd.src_desc(), bwd_w_pd.weights_desc(), md{}, dw_md_, compat::sum_attr());
      bwd_w_add_ = dnnl::matmul(add_pd);
      record_kernel(*ctx_, s.name, "backward_weights_add", shape, add_pd);
    }
    x_for_dw_ = PlannedReorder(*ctx_, x_md_, bwd_w_pd.weights_desc(), s.name);
    if (x_for_dw_.needed()) x_blocked_ = dnnl::memory(bwd_w_pd.weights_desc(), eng);
    const auto bwd_d_pd = compat::matmul(eng, y_md_, blocked_b ? md({n_, k_}, t, tag::any) : w_md_, x_md_);
    bwd_d_ = dnnl::matmul(bwd_d_pd);
    record_kernel(*ctx_, s.name, "backward_data", shape, bwd_d_pd);
    Param& w = add_param(ctx_, s.name + ".weight", ParamRole::weight, {n_, k_}, plain_md({n_, k_}, DType::f32));
    view_ = w.add_view(w_md_);  // the master itself in fp32, a bf16 copy otherwise
    bwd_view_ = bwd_d_pd.weights_desc() == w_md_ ? view_ : w.add_view(bwd_d_pd.weights_desc());
    if (s.bias) {
      add_param(ctx_, s.name + ".bias", ParamRole::bias, {n_}, plain_md({n_}, DType::f32));
      // db (1, out) = ones (1, M) . dy (M, out), f32 whatever dy's dtype: a matmul streams dy
      // at memory speed (oneDNN 2.6's reduction primitive has only a reference kernel here).
      const md ones_md({1, m_}, t, tag::ab);
      ones_ = dnnl::memory(ones_md, eng);
      const dnnl::memory ones_f32(md({1, m_}, dt::f32, tag::ab), eng);
      std::fill_n(static_cast<float*>(ones_f32.get_data_handle()), m_, 1.0f);
      reorder(*ctx_, ones_f32, ones_);
      const auto bias_pd = compat::matmul(eng, ones_md, y_md_, b_md_);
      bias_sum_ = dnnl::matmul(bias_pd);
      record_kernel(*ctx_, s.name, "backward_bias", shape, bias_pd);
    }
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, Dims{m_, n_}, dtype_, y_md_); }

  void forward(const Tensor& x, Tensor& y) override {
    const auto& eng = ctx_->engine;
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, cpu(x).mem()},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(wt_md_, eng, weights())},
                                               {DNNL_ARG_DST, cpu(y).mem()}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, dnnl::memory(b_md_, eng, params_[1].value().get_data_handle()));
    fwd_.execute(ctx_->stream, args);
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { run_backward(x, dy, dx, bwd_w_); }
  void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    if (!bwd_w_add_) Linear::backward_add(x, dy, dx);
    run_backward(x, dy, dx, bwd_w_add_);
  }

 private:
  void run_backward(const Tensor& x, const Tensor& dy, Tensor* dx, const dnnl::matmul& bwd_w) {
    const auto& eng = ctx_->engine;
    const dnnl::memory* xw = &cpu(x).mem();
    if (x_for_dw_.needed()) {
      x_for_dw_.run(*ctx_, cpu(x).mem(), x_blocked_);
      xw = &x_blocked_;
    }
    bwd_w.execute(ctx_->stream, {{DNNL_ARG_SRC, dnnl::memory(dyt_md_, eng, cpu(dy).data())},
                                  {DNNL_ARG_WEIGHTS, *xw},
                                  {DNNL_ARG_DST, params_[0].grad()}});
    if (dx)
      bwd_d_.execute(ctx_->stream, {{DNNL_ARG_SRC, cpu(dy).mem()},
                                    {DNNL_ARG_WEIGHTS, params_[0].view(bwd_view_)},
                                    {DNNL_ARG_DST, cpu(*dx).mem()}});
    if (bias_)
      bias_sum_.execute(ctx_->stream, {{DNNL_ARG_SRC, ones_},
                                       {DNNL_ARG_WEIGHTS, cpu(dy).mem()},
                                       {DNNL_ARG_DST, dnnl::memory(b_md_, eng, params_[1].grad().get_data_handle())}});
  }

  void* weights() const { return params_[0].view(view_).get_data_handle(); }

  Ctx ctx_;
  bool bias_;
  DType dtype_;
  int64_t m_ = 0, k_ = 0, n_ = 0;
  size_t view_ = 0, bwd_view_ = 0;  // W for forward (as W^T strides), W for backward data
  md x_md_, y_md_, w_md_, wt_md_, dyt_md_, dw_md_, b_md_;
  PlannedReorder x_for_dw_;  // x into the layout backward weights reads, where it differs
  dnnl::memory x_blocked_;
  dnnl::matmul fwd_, bwd_w_, bwd_d_;
  dnnl::matmul bwd_w_add_;  // planned with LinearSpec::add_grads
  dnnl::matmul bias_sum_;
  dnnl::memory ones_;  // (1, M) of 1 in the compute dtype
};

}  // namespace

std::unique_ptr<Linear> make_linear(Ctx ctx, const LinearSpec& s, const Tensor& x) {
  return std::make_unique<CpuLinear>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
