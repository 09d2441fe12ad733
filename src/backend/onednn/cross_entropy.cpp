// Softmax cross-entropy with label smoothing, on the host in f32 (the logits are small:
// (N, 1000) for ImageNet models). Smoothed target t = (1 - s) onehot(label) + s / K, so
//   loss_i = logsumexp(x_i) - sum_j t_j x_ij,   dloss_i/dx_ij = softmax(x_i)_j - t_j,
// averaged over the rows whose label is not ignore_index (masked-LM padding).
#include <algorithm>
#include <cmath>

#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuCrossEntropy final : public SoftmaxCrossEntropy {
 public:
  CpuCrossEntropy(Ctx ctx, const CrossEntropySpec& s, const CpuTensor& logits) : ctx_(std::move(ctx)), spec_(s) {
    const Dims& d = logits.dims();
    if (d.size() != 2 || d[1] != s.classes)
      throw_usage_error("cross_entropy: logits " + to_string(d) + " are not (M, " + std::to_string(s.classes) + ")");
    if (s.mean_over != 0) throw_usage_error("cross_entropy: mean_over is for the token cross-entropy only");
    rows_ = d[0];
    record_own_kernel(*ctx_, "cross_entropy", "forward_backward", shape_of(d, logits.dtype()));
    const md f32_md = plain_md(d, DType::f32);
    probs_ = ChargedMemory(*ctx_, f32_md);
    to_f32_ = PlannedReorder(*ctx_, logits.desc(), f32_md, "cross_entropy");
    from_f32_ = PlannedReorder(*ctx_, f32_md, logits.desc(), "cross_entropy");
    labels_.resize(static_cast<size_t>(rows_));
  }

  void forward(const Tensor& logits, const Tensor& labels) override {
    DLPERF_ASSERT(labels.dtype() == DType::s32 && labels.numel() == rows_, "labels are (M) s32");
    to_f32_.run(*ctx_, cpu(logits).mem(), probs_);
    ctx_->stream.wait();
    const auto* lab = static_cast<const int32_t*>(cpu(labels).data());
    std::copy(lab, lab + rows_, labels_.begin());
    auto* p = static_cast<float*>(probs_.get_data_handle());
    const int64_t k = spec_.classes;
    const double s = spec_.label_smoothing;
    double total = 0.0;
    int64_t counted = 0;
#pragma omp parallel for reduction(+ : total, counted)
    for (int64_t i = 0; i < rows_; ++i) {
      float* x = p + i * k;
      const int32_t label = labels_[static_cast<size_t>(i)];
      const float mx = *std::max_element(x, x + k);
      double sum = 0.0, sum_x = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        sum += std::exp(static_cast<double>(x[j] - mx));
        sum_x += x[j];
      }
      const double lse = mx + std::log(sum);
      if (label != spec_.ignore_index) {
        if (label < 0 || label >= k) continue;  // validated by the data source; never indexes out of range
        total += lse - ((1.0 - s) * x[label] + s / static_cast<double>(k) * sum_x);
        counted += 1;
      }
      for (int64_t j = 0; j < k; ++j) x[j] = static_cast<float>(std::exp(static_cast<double>(x[j]) - lse));  // softmax, kept for backward
    }
    counted_ = counted;
    loss_ = counted > 0 ? static_cast<float>(total / static_cast<double>(counted)) : 0.0f;
  }

  float loss() override { return loss_; }
  const float* loss_location() const override { return &loss_; }

  void backward(Tensor& dlogits, const LossGradScale& s) override {
    const float scale = s.device ? s.value * *s.device : s.value;
    const int64_t k = spec_.classes;
    const float smooth = spec_.label_smoothing / static_cast<float>(k);
    const float inv = counted_ > 0 ? scale / static_cast<float>(counted_) : 0.0f;
    auto* p = static_cast<float*>(probs_.get_data_handle());  // softmax -> gradient, in place
#pragma omp parallel for
    for (int64_t i = 0; i < rows_; ++i) {
      float* g = p + i * k;
      const int32_t label = labels_[static_cast<size_t>(i)];
      if (label == spec_.ignore_index || label < 0 || label >= k) {
        std::fill(g, g + k, 0.0f);
        continue;
      }
      for (int64_t j = 0; j < k; ++j) g[j] = (g[j] - smooth) * inv;
      g[label] -= (1.0f - spec_.label_smoothing) * inv;
    }
    from_f32_.run(*ctx_, probs_, cpu(dlogits).mem());
  }

 private:
  Ctx ctx_;
  CrossEntropySpec spec_;
  int64_t rows_ = 0;
  int64_t counted_ = 0;
  float loss_ = 0.0f;
  std::vector<int32_t> labels_;
  ChargedMemory probs_;  // (M, K) f32: logits, then softmax, then the gradient
  PlannedReorder to_f32_, from_f32_;
};

}  // namespace

std::unique_ptr<SoftmaxCrossEntropy> make_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits) {
  return std::make_unique<CpuCrossEntropy>(std::move(ctx), s, cpu(logits));
}

}  // namespace dlperf::onednn
