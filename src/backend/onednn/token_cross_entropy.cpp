// Next-token cross-entropy over a large vocabulary (Llama: 128,256 classes). The logits (M, K)
// stay in the compute dtype; each row is streamed through f32 registers, never copied to an f32
// (M, K) buffer (4.2 GB for one 8,192-token sequence of Llama 3), and only its log-sum-exp is
// kept (M floats). The backward rebuilds the softmax from it and may write the gradient over the
// logits themselves (row i is read, then written), so the head needs one (M, K) tensor.
//   loss = mean over counted rows of lse_i - x_i[label_i]
//   dx_ij = scale / N (exp(x_ij - lse_i) - [j == label_i]),   rows with ignore_index: 0
// N is the rows counted, or spec.mean_over where a batch's loss is computed in chunks.
// The row kernels use a vectorised exp and are compiled per ISA (fast_exp.h): with libm's scalar
// expf, the 65 M exps of a reduced Llama's step (2,048 tokens x 32,000) took longer than the
// rest of the loss.
#include <omp.h>

#include <cmath>
#include <limits>

#include "backend/onednn/bf16.h"
#include "backend/onednn/fast_exp.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

// The log-sum-exp of one row of k logits.
template <class T>
inline float row_lse(const T* xr, int64_t k) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < k; ++j) mx = std::max(mx, to_f32(xr[j]));
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < k; ++j) sum += fast_exp(to_f32(xr[j]) - mx);
  return mx + std::log(sum);
}

// g_j = exp(x_j - lse) * inv, in place over the row (g may be x).
template <class T>
inline void row_softmax_scaled(const T* xr, T* gr, int64_t k, float lse, float inv) {
#pragma omp simd
  for (int64_t j = 0; j < k; ++j) gr[j] = from_f32<T>(fast_exp(to_f32(xr[j]) - lse) * inv);
}

DLPERF_ISA_CLONES float lse_of(const float* xr, int64_t k) { return row_lse(xr, k); }
DLPERF_ISA_CLONES float lse_of(const bf16_t* xr, int64_t k) { return row_lse(xr, k); }
DLPERF_ISA_CLONES void softmax_scaled(const float* xr, float* gr, int64_t k, float lse, float inv) { row_softmax_scaled(xr, gr, k, lse, inv); }
DLPERF_ISA_CLONES void softmax_scaled(const bf16_t* xr, bf16_t* gr, int64_t k, float lse, float inv) {
  row_softmax_scaled(xr, gr, k, lse, inv);
}

class CpuTokenCrossEntropy final : public SoftmaxCrossEntropy {
 public:
  CpuTokenCrossEntropy(Ctx ctx, const CrossEntropySpec& s, const CpuTensor& logits) : ctx_(std::move(ctx)), spec_(s), dtype_(logits.dtype()) {
    const Dims& d = logits.dims();
    if (d.size() != 2 || d[1] != s.classes || logits.desc() != plain_md(d, dtype_))
      throw_usage_error("token_cross_entropy: logits " + to_string(d) + " are not a plain (M, " + std::to_string(s.classes) + ")");
    if (s.label_smoothing != 0.0f) throw_usage_error("token_cross_entropy: no label smoothing");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("token_cross_entropy: f32 or bf16 logits only");
    rows_ = d[0];
    record_own_kernel(*ctx_, "token_cross_entropy", "forward_backward", shape_of(d, dtype_));
    lse_.resize(static_cast<size_t>(rows_));
    labels_.resize(static_cast<size_t>(rows_));
  }

  void forward(const Tensor& logits, const Tensor& labels) override {
    DLPERF_ASSERT(labels.dtype() == DType::s32 && labels.numel() == rows_, "labels are (M) s32");
    const auto* lab = static_cast<const int32_t*>(cpu(labels).data());
    std::copy(lab, lab + rows_, labels_.begin());
    const int64_t k = spec_.classes;
    double total = 0.0;
    int64_t counted = 0;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(cpu(logits).data());
#pragma omp parallel for reduction(+ : total, counted) schedule(static)
      for (int64_t i = 0; i < rows_; ++i) {
        const T* xr = x + i * k;
        const float lse = lse_of(xr, k);
        lse_[static_cast<size_t>(i)] = lse;
        const int32_t label = labels_[static_cast<size_t>(i)];
        if (label == spec_.ignore_index || label < 0 || label >= k) continue;  // ids are validated by the data source
        total += static_cast<double>(lse) - static_cast<double>(to_f32(xr[label]));
        counted += 1;
      }
    });
    counted_ = spec_.mean_over > 0 ? spec_.mean_over : counted;  // the divisor of the loss and its gradient
    loss_ = counted > 0 ? static_cast<float>(total / static_cast<double>(counted_)) : 0.0f;
  }

  float loss() override { return loss_; }
  const float* loss_location() const override { return &loss_; }

  // dlogits may be the forward's logits tensor: each row is read before it is written.
  void backward(Tensor& dlogits, const LossGradScale& s) override {
    DLPERF_ASSERT(dlogits.dtype() == dtype_ && dlogits.numel() == rows_ * spec_.classes, "dlogits of the logits' shape");
    const float scale = s.device ? s.value * *s.device : s.value;
    const float inv = counted_ > 0 ? scale / static_cast<float>(counted_) : 0.0f;
    const int64_t k = spec_.classes;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      T* g = static_cast<T*>(cpu(dlogits).data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < rows_; ++i) {
        T* gr = g + i * k;
        const int32_t label = labels_[static_cast<size_t>(i)];
        if (label == spec_.ignore_index || label < 0 || label >= k) {
          for (int64_t j = 0; j < k; ++j) gr[j] = from_f32<T>(0.0f);
          continue;
        }
        const float lse = lse_[static_cast<size_t>(i)];
        const float at_label = fast_exp(to_f32(gr[label]) - lse) - 1.0f;
        softmax_scaled(gr, gr, k, lse, inv);
        gr[label] = from_f32<T>(at_label * inv);
      }
    });
  }

 private:
  Ctx ctx_;
  CrossEntropySpec spec_;
  DType dtype_;
  int64_t rows_ = 0, counted_ = 0;  // counted_: the mean's divisor (spec.mean_over, else the counted rows)
  float loss_ = 0.0f;
  std::vector<float> lse_;       // (M) log-sum-exp of each row, from the last forward
  std::vector<int32_t> labels_;  // (M)
};

}  // namespace

std::unique_ptr<SoftmaxCrossEntropy> make_token_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits) {
  return std::make_unique<CpuTokenCrossEntropy>(std::move(ctx), s, cpu(logits));
}

}  // namespace dlperf::onednn
