// A linear layer whose weight is another layer's embedding table (BERT's masked-LM decoder,
// tied to the word embeddings): y (M, V) = x (M, C) E^T + b, E (V, C). On oneDNN's matmul,
// with E^T expressed as strides of E's storage. The layer owns only its bias; E stays one
// parameter of the embedding (one entry in the flat buffers, one optimizer update):
//   dE = dy^T x      written here first (backward runs the heads before the embeddings),
//                    then the embedding's own backward adds its scatter (share_embedding_weight)
//   dx = dy E,   db = sum over rows of dy.
// bf16 runs read a bf16 view of E, refreshed with the embedding's other compute weights.
#include <omp.h>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuTiedLinear final : public WithParams<Linear> {
 public:
  CpuTiedLinear(Ctx ctx, const LinearSpec& s, Embedding& tied, const CpuTensor& x)
      : ctx_(std::move(ctx)), dtype_(x.dtype()), bias_(s.bias), table_(share_embedding_weight(tied)) {
    const Dims& e = tied.params().at(0).dims;  // (V, C)
    m_ = x.dims().at(0), v_ = e[0], c_ = e[1];
    if (x.dims().size() != 2 || x.dims()[1] != c_ || s.in_features != c_ || s.out_features != v_)
      throw_usage_error("tied_linear " + s.name + ": input " + to_string(x.dims()) + " and spec must match the tied table " +
                        to_string(e));
    const dt t = to_dnnl(dtype_);
    view_ = table_.add_view(md({v_, c_}, t, tag::ab));
    x_md_ = md({m_, c_}, t, tag::ab);
    y_md_ = md({m_, v_}, t, tag::ab);
    et_md_ = md({c_, v_}, t, dnnl::memory::dims{1, c_});  // E^T over E's storage
    e_md_ = md({v_, c_}, t, tag::ab);
    dyt_md_ = md({v_, m_}, t, dnnl::memory::dims{1, v_});  // dy^T over dy's storage
    de_md_ = md({v_, c_}, dt::f32, tag::ab);
    b_md_ = md({1, v_}, dt::f32, tag::ab);
    // Llama 3.2's tied head has no bias (BERT's has).
    const auto fwd_pd = compat::matmul(ctx_->engine, x_md_, et_md_, bias_ ? b_md_ : compat::md{}, y_md_);
    const auto bwd_e_pd = compat::matmul(ctx_->engine, dyt_md_, x_md_, de_md_);
    const auto bwd_x_pd = compat::matmul(ctx_->engine, y_md_, e_md_, x_md_);
    fwd_ = dnnl::matmul(fwd_pd);
    bwd_e_ = dnnl::matmul(bwd_e_pd);
    bwd_x_ = dnnl::matmul(bwd_x_pd);
    const std::string shape = shape_of(x.dims(), dtype_) + " -> " + std::to_string(v_);
    record_kernel(*ctx_, s.name, "forward", shape, fwd_pd);
    record_kernel(*ctx_, s.name, "backward_weights", shape, bwd_e_pd);
    record_kernel(*ctx_, s.name, "backward_data", shape, bwd_x_pd);
    if (s.add_grads) {  // dE += dy^T x: the same product with a sum post-op
      if (bias_) throw_usage_error("tied_linear " + s.name + ": adding gradients needs a bias-free layer");
      const auto add_pd = compat::matmul(ctx_->engine, dyt_md_, x_md_, compat::md{}, de_md_, compat::sum_attr());
      bwd_e_add_ = dnnl::matmul(add_pd);
      record_kernel(*ctx_, s.name, "backward_weights_add", shape, add_pd);
    }
    if (bias_) add_param(ctx_, s.name + ".bias", ParamRole::bias, {v_}, plain_md({v_}, DType::f32));
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, Dims{m_, v_}, dtype_, y_md_); }

  void forward(const Tensor& x, Tensor& y) override {
    const auto& eng = ctx_->engine;
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, cpu(x).mem()},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(et_md_, eng, table_.view(view_).get_data_handle())},
                                               {DNNL_ARG_DST, cpu(y).mem()}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, dnnl::memory(b_md_, eng, params_[0].value().get_data_handle()));
    fwd_.execute(ctx_->stream, args);
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { run_backward(x, dy, dx, bwd_e_); }
  void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    if (!bwd_e_add_) Linear::backward_add(x, dy, dx);
    run_backward(x, dy, dx, bwd_e_add_);
  }

 private:
  void run_backward(const Tensor& x, const Tensor& dy, Tensor* dx, const dnnl::matmul& bwd_e) {
    const auto& eng = ctx_->engine;
    bwd_e.execute(ctx_->stream, {{DNNL_ARG_SRC, dnnl::memory(dyt_md_, eng, cpu(dy).data())},
                                  {DNNL_ARG_WEIGHTS, cpu(x).mem()},
                                  {DNNL_ARG_DST, table_.grad()}});
    if (dx)
      bwd_x_.execute(ctx_->stream, {{DNNL_ARG_SRC, cpu(dy).mem()},
                                    {DNNL_ARG_WEIGHTS, dnnl::memory(e_md_, eng, table_.view(view_).get_data_handle())},
                                    {DNNL_ARG_DST, cpu(*dx).mem()}});
    if (!bias_) return;
    // db (V) = column sums of dy (M, V); threads split the columns.
    auto* db = static_cast<float*>(params_[0].grad().get_data_handle());
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* d = static_cast<const T*>(cpu(dy).data());
#pragma omp parallel
      {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t j0 = v_ * t / nt, j1 = v_ * (t + 1) / nt;
        for (int64_t j = j0; j < j1; ++j) db[j] = 0.0f;
        for (int64_t i = 0; i < m_; ++i)
          for (int64_t j = j0; j < j1; ++j) db[j] += to_f32(d[i * v_ + j]);
      }
    });
  }

  Ctx ctx_;
  DType dtype_;
  bool bias_;
  Param& table_;  // the embedding's (V, C) table
  size_t view_ = 0;
  int64_t m_ = 0, v_ = 0, c_ = 0;
  md x_md_, y_md_, et_md_, e_md_, dyt_md_, de_md_, b_md_;
  dnnl::matmul fwd_, bwd_e_, bwd_x_;
  dnnl::matmul bwd_e_add_;  // planned with LinearSpec::add_grads
};

}  // namespace

std::unique_ptr<Linear> make_tied_linear(Ctx ctx, const LinearSpec& s, Embedding& tied, const Tensor& x) {
  return std::make_unique<CpuTiedLinear>(std::move(ctx), s, tied, cpu(x));
}

}  // namespace dlperf::onednn
