// Embedding table lookup (kernels in embedding.cu): ids (M) s32 -> y (M, C) = weight[ids] in
// the compute type; weight (vocab, C). backward overwrites the f32 table gradient with the
// scatter-add of dy rows, deterministically and linear in M (a sort of the ids, then ordered
// sums; embedding.cu), or adds to it when the table is tied to a decoder.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaEmbedding final : public WithParams<Embedding> {
 public:
  CudaEmbedding(Ctx ctx, const EmbeddingSpec& s, const CudaTensor& ids, DType compute)
      : ctx_(std::move(ctx)), spec_(s), dtype_(compute), rows_(ids.numel()) {
    if (ids.dtype() != DType::s32 || ids.dims().size() != 1)
      throw_usage_error("embedding " + s.name + ": ids " + to_string(ids.dims()) + " are not (M) s32");
    add_param(ctx_, s.name + ".weight", ParamRole::embedding, {s.vocab, s.features}, dtype_, false, kTableRowPad);
    ctx_->scratch.reserve(scatter_rows_scratch_bytes(rows_, s.features, s.vocab));
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{rows_, spec_.features}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& ids, Tensor& y) override {
    DLPERF_CHECK(launch_embedding_forward(dev(ids).as<const int32_t>(), params_[0].compute(), dev(y).data(), elem(dtype_), rows_,
                                          spec_.vocab, spec_.features, ctx_->s()));
  }

  void backward(const Tensor& ids, const Tensor& dy) override {
    DLPERF_CHECK(launch_scatter_rows(dev(ids).as<const int32_t>(), dev(dy).data(), elem(dtype_), params_[0].grad(), ElemType::f32, rows_,
                                     spec_.vocab, spec_.features, accumulate_, ctx_->scratch.get(), ctx_->s()));
  }

  // The table as the weight of a tied decoder (tied_linear.cpp), whose backward writes the
  // gradient first: from then on this backward adds to it.
  Param& share_weight() {
    accumulate_ = true;
    return params_[0];
  }

 private:
  Ctx ctx_;
  EmbeddingSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  bool accumulate_ = false;
};

}  // namespace

std::unique_ptr<Embedding> make_embedding(Ctx ctx, const EmbeddingSpec& s, const Tensor& ids, DType compute) {
  return std::make_unique<CudaEmbedding>(std::move(ctx), s, dev(ids), compute);
}

Param& share_embedding_weight(Embedding& e) { return static_cast<CudaEmbedding&>(e).share_weight(); }

}  // namespace dlperf::cuda
