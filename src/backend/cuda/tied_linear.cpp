// A linear layer whose weight is an embedding table (BERT's masked-LM decoder, tied to the
// word embeddings): y (M, V) = x (M, C) E^T + b, E (V, C). The layer owns only its bias; E
// stays one parameter of the embedding (one flat-buffer entry, one optimizer update):
//   dE = dy^T x   written here first (backward runs the heads before the embeddings); the
//                 embedding's own backward then adds its scatter (share_embedding_weight)
//   dx = dy E,    db = sum over rows of dy.
// f16/bf16 runs read the embedding's compute copy of E, refreshed with its other weights.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaTiedLinear final : public WithParams<Linear> {
 public:
  CudaTiedLinear(Ctx ctx, const LinearSpec& s, Embedding& tied, const CudaTensor& x)
      : ctx_(std::move(ctx)), dtype_(x.dtype()), table_(share_embedding_weight(tied)) {
    const Dims& e = tied.params().at(0).dims;  // (V, C)
    v_ = e[0];
    c_ = e[1];
    if (x.dims().size() != 2 || x.dims()[1] != c_ || s.in_features != c_ || s.out_features != v_ || !s.bias)
      throw_usage_error("tied_linear " + s.name + ": input " + to_string(x.dims()) + " and spec must match the tied table " + to_string(e) +
                        " (with a bias)");
    m_ = x.dims()[0];
    add_param(ctx_, s.name + ".bias", ParamRole::bias, {v_}, DType::f32);
    ctx_->ones(dtype_, m_);
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, Dims{m_, v_}, dtype_, Layout::canonical); }

  void forward(const Tensor& x, Tensor& y) override {
    gemm(*ctx_, {false, true, m_, v_, c_, 1}, 1.0f, dev(x).data(), table_.compute(), dtype_, 0.0f, dev(y).data(), dtype_);
    DLPERF_CHECK(launch_add_bias(dev(y).data(), elem(dtype_), params_[0].value(), m_ * v_, v_, 1, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    gemm(*ctx_, {true, false, v_, c_, m_, 1}, 1.0f, dev(dy).data(), dev(x).data(), dtype_, 0.0f, table_.grad(), DType::f32);
    column_sums(*ctx_, dev(dy).data(), dtype_, m_, v_, params_[0].grad());
    if (dx) gemm(*ctx_, {false, false, m_, c_, v_, 1}, 1.0f, dev(dy).data(), table_.compute(), dtype_, 0.0f, dev(*dx).data(), dtype_);
  }

 private:
  Ctx ctx_;
  DType dtype_;
  Param& table_;  // the embedding's (V, C) table
  int64_t m_ = 0, v_ = 0, c_ = 0;
};

}  // namespace

std::unique_ptr<Linear> make_tied_linear(Ctx ctx, const LinearSpec& s, Embedding& tied, const Tensor& x) {
  return std::make_unique<CudaTiedLinear>(std::move(ctx), s, tied, dev(x));
}

}  // namespace dlperf::cuda
