// Attention softmax with the additive padding mask (kernels in masked_softmax.cu):
// x (B, H, Tq, Tk), mask (B, Tk) f32 -> y = softmax over Tk of (x + mask); backward from y.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaMaskedSoftmax final : public MaskedSoftmax {
 public:
  CudaMaskedSoftmax(Ctx ctx, const CudaTensor& x) : ctx_(std::move(ctx)), dtype_(x.dtype()) {
    const Dims& d = x.dims();
    if (d.size() != 4) throw_usage_error("masked_softmax: scores " + to_string(d) + " are not (B, H, Tq, Tk)");
    batch_ = d[0];
    tk_ = d[3];
    rows_per_batch_ = d[1] * d[2];
  }

  void forward(const Tensor& x, const Tensor& mask, Tensor& y) override {
    DLPERF_ASSERT(mask.dtype() == DType::f32 && mask.numel() == batch_ * tk_, "mask is (B, Tk) f32");
    DLPERF_CHECK(launch_masked_softmax_forward(dev(x).data(), dev(mask).as<const float>(), dev(y).data(), elem(dtype_),
                                               batch_ * rows_per_batch_, tk_, rows_per_batch_, ctx_->s()));
  }

  void backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    DLPERF_CHECK(launch_masked_softmax_backward(dev(y).data(), dev(dy).data(), dev(dx).data(), elem(dtype_), batch_ * rows_per_batch_,
                                                tk_, ctx_->s()));
  }

 private:
  Ctx ctx_;
  DType dtype_;
  int64_t batch_ = 0, tk_ = 0, rows_per_batch_ = 0;  // rows_per_batch = H * Tq
};

}  // namespace

std::unique_ptr<MaskedSoftmax> make_masked_softmax(Ctx ctx, const Tensor& x) {
  return std::make_unique<CudaMaskedSoftmax>(std::move(ctx), dev(x));
}

}  // namespace dlperf::cuda
