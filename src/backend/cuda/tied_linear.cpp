// A linear layer whose weight is an embedding table: y (M, V) = x (M, C) E^T (+ b), E (V, C).
// BERT's masked-LM decoder (with a bias) and Llama 3.2's output head (none) are tied to their
// word embeddings. The layer owns only its bias, if any; E stays one parameter of the embedding
// (one flat-buffer entry, one optimizer update).
//
// Vocabulary padding: the CUDA embedding stores its table with the rows padded to a multiple
// of 8 (Vp, zero rows; 30,522 -> 30,528).
//   With a bias (BERT): the bias is padded likewise and every GEMM runs over Vp, tensor-core
//   aligned leading dimensions. The logits are (M, V) with a row pitch of Vp; the padding
//   columns hold 0 (zero rows, zero bias), the cross-entropy reads only the V real ones and
//   writes 0 into the padding of dlogits. The parameter count is unchanged.
//     forward  y = x E^T + b       cuBLASLt, bias epilogue
//     backward dE = dy^T x         written here first (backward runs the heads before the
//              db = sum_rows dy    embeddings; cuBLASLt's bias-gradient epilogue); the
//                                  embedding's own backward then adds its scatter
//              dx = dy E
//   Without a bias (Llama): the GEMMs run over the V real rows of the table and the logits are
//   dense (M, V), as the token cross-entropy reads them (Llama's vocabularies, 128,256 and
//   32,000, are multiples of 8 already: V = Vp). The padding rows' gradient is never written
//   and stays 0. cuBLAS GEMMs (no epilogue to fuse).
// f16/bf16 runs read the embedding's compute copy of E, refreshed with its other weights.
#include "backend/cuda/lt_gemm.h"
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
    vp_ = table_.stored_dims()[0];
    bias_ = s.bias;
    if (x.dims().size() != 2 || x.dims()[1] != c_ || s.in_features != c_ || s.out_features != v_ || x.padded())
      throw_usage_error("tied_linear " + s.name + ": input " + to_string(x.dims()) + " and spec must match the tied table " + to_string(e));
    m_ = x.dims()[0];
    DLPERF_ASSERT(vp_ % kTableRowPad == 0, "the tied table is stored padded");
    n_ = bias_ ? vp_ : v_;
    if (s.add_grads && bias_) throw_usage_error("tied_linear " + s.name + ": adding gradients needs a bias-free layer");
    add_grads_ = s.add_grads;
    if (!bias_) {
      const std::string shape = shape_str(x.dims(), dtype_) + " -> " + std::to_string(v_);
      for (const char* pass : {"forward", "backward_data", "backward_weights"})
        ctx_->record_kernel(s.name, pass, shape, "cublas gemm, " + ctx_->gemm_math_name(dtype_));
      return;
    }
    add_param(ctx_, s.name + ".bias", ParamRole::bias, {v_}, dtype_, false, kTableRowPad);  // (Vp) like the table's rows
    fwd_ = std::make_unique<LtGemm>(*ctx_, GemmShape{false, true, m_, vp_, c_, 1}, c_, c_, vp_, dtype_, dtype_, LtEpilogue::bias);
    de_ = std::make_unique<LtGemm>(*ctx_, GemmShape{true, false, vp_, c_, m_, 1}, vp_, c_, c_, dtype_, DType::f32, LtEpilogue::bgrad);
    const std::string shape = shape_str(x.dims(), dtype_) + " -> " + std::to_string(v_) + " padded to " + std::to_string(vp_);
    if (fwd_->valid()) {
      ctx_->record_kernel(s.name, "forward", shape, "cublaslt bias epilogue, " + ctx_->gemm_math_name(dtype_));
    } else {
      ctx_->warn_fallback(s.name, "forward", shape, "cublas gemm + dlperf:add_bias, " + ctx_->gemm_math_name(dtype_), fwd_->why_not());
      fwd_.reset();
    }
    if (de_->valid()) {
      ctx_->record_kernel(s.name, "backward_weights", shape, "cublaslt bgradb epilogue, " + ctx_->gemm_math_name(dtype_));
    } else {
      ctx_->warn_fallback(s.name, "backward_weights", shape, "cublas gemm + column sums, " + ctx_->gemm_math_name(dtype_), de_->why_not());
      de_.reset();
    }
    if (!fwd_ || !de_) ctx_->ones(dtype_, m_);
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, Dims{m_, v_}, dtype_, Layout::canonical, n_); }

  void forward(const Tensor& x, Tensor& y) override {
    DLPERF_ASSERT(dev(y).pitch() == n_, "tied_linear output made by make_output");
    if (!bias_) {
      gemm(*ctx_, {false, true, m_, v_, c_, 1}, 1.0f, dev(x).data(), table_.compute(), dtype_, 0.0f, dev(y).data(), dtype_);
      return;
    }
    if (fwd_) {
      fwd_->run(*ctx_, 1.0f, dev(x).data(), table_.compute(), dev(y).data(), params_[0].compute());
      return;
    }
    gemm(*ctx_, {false, true, m_, vp_, c_, 1}, 1.0f, dev(x).data(), table_.compute(), dtype_, 0.0f, dev(y).data(), dtype_);
    DLPERF_CHECK(launch_add_bias(dev(y).data(), elem(dtype_), params_[0].value(), m_ * vp_, vp_, 1, ctx_->s()));
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor* dx) override { run_backward(x, dy, dx, false); }
  // Bias-free: dE = dy^T x is one plain GEMM, and adding it is its beta = 1.
  void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) override {
    if (!add_grads_) Linear::backward_add(x, dy, dx);
    run_backward(x, dy, dx, true);
  }

 private:
  void run_backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool add) {
    DLPERF_ASSERT(dev(dy).pitch() == n_, "dlogits in the logits' layout");
    if (!bias_) {  // the first V rows of the (Vp, C) gradient, then dx over them
      gemm(*ctx_, {true, false, v_, c_, m_, 1}, 1.0f, dev(dy).data(), dev(x).data(), dtype_, add ? 1.0f : 0.0f, table_.grad(),
           DType::f32);
      if (dx) gemm(*ctx_, {false, false, m_, c_, v_, 1}, 1.0f, dev(dy).data(), table_.compute(), dtype_, 0.0f, dev(*dx).data(), dtype_);
      return;
    }
    if (de_) {
      de_->run(*ctx_, 1.0f, dev(dy).data(), dev(x).data(), table_.grad(), params_[0].grad());
    } else {
      gemm(*ctx_, {true, false, vp_, c_, m_, 1}, 1.0f, dev(dy).data(), dev(x).data(), dtype_, 0.0f, table_.grad(), DType::f32);
      column_sums(*ctx_, dev(dy).data(), dtype_, m_, vp_, params_[0].grad());
    }
    if (dx) gemm(*ctx_, {false, false, m_, c_, vp_, 1}, 1.0f, dev(dy).data(), table_.compute(), dtype_, 0.0f, dev(*dx).data(), dtype_);
  }

  Ctx ctx_;
  DType dtype_;
  Param& table_;  // the embedding's (V, C) table, stored (Vp, C)
  bool bias_ = true, add_grads_ = false;
  int64_t m_ = 0, v_ = 0, vp_ = 0, c_ = 0;
  int64_t n_ = 0;  // the GEMMs' width and the logits' row pitch: Vp with a bias, V without
  std::unique_ptr<LtGemm> fwd_, de_;
};

}  // namespace

std::unique_ptr<Linear> make_tied_linear(Ctx ctx, const LinearSpec& s, Embedding& tied, const Tensor& x) {
  return std::make_unique<CudaTiedLinear>(std::move(ctx), s, tied, dev(x));
}

}  // namespace dlperf::cuda
