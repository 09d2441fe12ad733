// Softmax cross-entropy with label smoothing and ignore_index (kernels in cross_entropy.cu):
// logits (M, K) in any float type, labels (M) s32, the mean loss over counted rows in f32.
// The loss stays on the device; loss() is the one call that waits for it (the trainer copies it
// back asynchronously from loss_location() instead). backward reads the
// logits and labels of the last forward (the model keeps both) and the saved log-sum-exp.
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaCrossEntropy final : public SoftmaxCrossEntropy {
 public:
  CudaCrossEntropy(Ctx ctx, const CrossEntropySpec& s, const CudaTensor& logits) : ctx_(std::move(ctx)), spec_(s), dtype_(logits.dtype()) {
    const Dims& d = logits.dims();
    if (d.size() != 2 || d[1] != s.classes)
      throw_usage_error("cross_entropy: logits " + to_string(d) + " are not (M, " + std::to_string(s.classes) + ")");
    if (s.mean_over != 0) throw_usage_error("cross_entropy: mean_over is for the token cross-entropy only");
    rows_ = d[0];
    ld_ = logits.pitch();  // a padded vocabulary's logits (tied_linear.cpp)
    // lse (M) | row losses and counts (2M) | mean loss and count (2)
    stats_ = ctx_->alloc(static_cast<size_t>(3 * rows_ + 2) * sizeof(float));
  }

  void forward(const Tensor& logits, const Tensor& labels) override {
    DLPERF_ASSERT(labels.dtype() == DType::s32 && labels.numel() == rows_, "labels are (M) s32");
    logits_ = dev(logits).data();
    labels_ = dev(labels).as<const int32_t>();
    DLPERF_ASSERT(dev(logits).pitch() == ld_, "logits in the planned layout");
    DLPERF_CHECK(launch_cross_entropy_forward(logits_, elem(dtype_), labels_, rows_, spec_.classes, ld_, spec_.label_smoothing,
                                              spec_.ignore_index, lse(), lse() + rows_, totals(), ctx_->s()));
  }

  float loss() override {
    float host = 0.0f;
    DLPERF_CHECK(cudaMemcpyAsync(&host, totals(), sizeof(float), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();
    return host;
  }

  const float* loss_location() const override { return totals(); }

  void backward(Tensor& dlogits, const LossGradScale& scale) override {
    DLPERF_ASSERT(logits_ != nullptr, "cross_entropy backward follows a forward");
    DLPERF_ASSERT(dev(dlogits).pitch() == ld_, "dlogits in the logits' layout");
    DLPERF_CHECK(launch_cross_entropy_backward(logits_, elem(dtype_), labels_, lse(), totals(), rows_, spec_.classes, ld_, spec_.label_smoothing,
                                               spec_.ignore_index, scale.value, scale.device, dev(dlogits).data(), ctx_->s()));
  }

 private:
  float* lse() const { return stats_.as<float>(); }
  float* totals() const { return stats_.as<float>() + 3 * rows_; }

  Ctx ctx_;
  CrossEntropySpec spec_;
  DType dtype_;
  int64_t rows_ = 0, ld_ = 0;  // ld: the logits' row pitch
  DeviceMemory stats_;
  const void* logits_ = nullptr;  // the last forward's inputs
  const int32_t* labels_ = nullptr;
};

}  // namespace

std::unique_ptr<SoftmaxCrossEntropy> make_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits) {
  return std::make_unique<CudaCrossEntropy>(std::move(ctx), s, dev(logits));
}

}  // namespace dlperf::cuda
