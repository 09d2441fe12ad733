// Dropout (kernel in eltwise.cu): y = mask * x / (1 - p), mask ~ Bernoulli(1 - p) from a
// counter-based hash of (seed, call counter, element): no mask is stored, backward redraws
// the same one from the (seed, counter) of the last forward. p = 0 is a copy. The call counter
// lives on the device and each forward advances it there (not on repeat_last_mask()), so a
// step replayed from a CUDA graph draws new masks, the ones an eager step would.
// The mask stream is this backend's own; it does not reproduce the CPU backend's masks.
#include <utility>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaDropout final : public Dropout {
 public:
  CudaDropout(Ctx ctx, float p, const CudaTensor& x) : ctx_(std::move(ctx)), p_(p), dtype_(x.dtype()), nhwc_(x.nhwc()) {
    if (!(p >= 0.0f && p < 1.0f)) throw_usage_error("dropout probability " + std::to_string(p) + " is not in [0, 1)");
    if (p_ > 0.0f) {
      counter_ = ctx_->alloc(sizeof(uint64_t));
      DLPERF_CHECK(cudaMemsetAsync(counter_.get(), 0, sizeof(uint64_t), ctx_->s()));
    }
  }

  void forward(const Tensor& x, Tensor& y, uint64_t seed) override {
    seed_ = seed;
    // repeat_last_mask(): the same (seed, counter), the same mask
    if (!std::exchange(repeat_, false) && p_ > 0.0f) DLPERF_CHECK(launch_dropout_advance(counter_.as<uint64_t>(), ctx_->s()));
    apply(x, y);
  }
  void repeat_last_mask() override { repeat_ = true; }
  void backward(const Tensor& dy, Tensor& dx) override { apply(dy, dx); }

 private:
  void apply(const Tensor& in, Tensor& out) {
    if (p_ == 0.0f) {
      convert(*ctx_, dev(in).data(), dtype_, nhwc_, dev(out).data(), dtype_, nhwc_, in.dims());
      return;
    }
    DLPERF_CHECK(launch_dropout(dev(in).data(), dev(out).data(), elem(dtype_), in.numel(), p_, seed_, counter_.as<uint64_t>(), ctx_->s()));
  }

  Ctx ctx_;
  float p_;
  DType dtype_;
  bool nhwc_;
  uint64_t seed_ = 0;
  DeviceMemory counter_;  // (1) uint64: forwards so far (p > 0)
  bool repeat_ = false;
};

}  // namespace

std::unique_ptr<Dropout> make_dropout(Ctx ctx, float p, const Tensor& x) { return std::make_unique<CudaDropout>(std::move(ctx), p, dev(x)); }

}  // namespace dlperf::cuda
