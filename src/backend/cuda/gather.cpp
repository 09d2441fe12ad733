// Row gather for BERT's heads (the masked-LM positions, the first token of each sequence):
// x (M, C) -> y (R, C) = x[idx], idx (R) s32. Backward zeroes dx and scatter-adds dy rows
// without atomics (deterministic). Kernels: the embedding lookup and scatter in embedding.cu.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaRowGather final : public RowGather {
 public:
  CudaRowGather(Ctx ctx, const CudaTensor& x, const CudaTensor& idx) : ctx_(std::move(ctx)), dtype_(x.dtype()) {
    if (x.dims().size() != 2) throw_usage_error("gather_rows: x " + to_string(x.dims()) + " must be a plain (M, C) matrix");
    if (idx.dtype() != DType::s32 || idx.dims().size() != 1) throw_usage_error("gather_rows: indices must be (R) s32");
    m_ = x.dims()[0];
    c_ = x.dims()[1];
    r_ = idx.dims()[0];
    ctx_->scratch.reserve(scatter_rows_scratch_bytes(r_, c_, m_));
  }

  TensorPtr make_output() const override { return std::make_unique<CudaTensor>(ctx_, Dims{r_, c_}, dtype_, Layout::canonical); }

  void forward(const Tensor& x, const Tensor& idx, Tensor& y) override {
    DLPERF_CHECK(launch_embedding_forward(dev(idx).as<const int32_t>(), dev(x).data(), dev(y).data(), elem(dtype_), r_, m_, c_, ctx_->s()));
  }

  void backward(const Tensor& idx, const Tensor& dy, Tensor& dx) override {
    DLPERF_CHECK(launch_scatter_rows(dev(idx).as<const int32_t>(), dev(dy).data(), elem(dtype_), dev(dx).data(), elem(dtype_), r_, m_, c_,
                                     false, ctx_->scratch.get(), ctx_->s()));
  }

 private:
  Ctx ctx_;
  DType dtype_;
  int64_t m_ = 0, c_ = 0, r_ = 0;
};

}  // namespace

std::unique_ptr<RowGather> make_gather_rows(Ctx ctx, const Tensor& x, const Tensor& idx) {
  return std::make_unique<CudaRowGather>(std::move(ctx), dev(x), dev(idx));
}

}  // namespace dlperf::cuda
