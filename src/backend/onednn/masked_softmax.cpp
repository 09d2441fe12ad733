// Masked softmax over the keys of attention scores, hand-written (the additive mask is
// per-batch, broadcast over heads and queries, and fusing it saves a pass over the scores):
//   y = softmax_k(x + mask),   dx = y * (dy - sum_k(dy * y))
// computed in f32 per row (max-subtracted exponentials) whether the data is f32 or bf16.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuMaskedSoftmax final : public MaskedSoftmax {
 public:
  CpuMaskedSoftmax(Ctx ctx, const CpuTensor& x) : ctx_(std::move(ctx)), dims_(x.dims()), dtype_(x.dtype()) {
    record_own_kernel(*ctx_, "masked_softmax", "forward_backward", shape_of(dims_, dtype_));
    if (dims_.size() != 4) throw_usage_error("masked_softmax: scores " + to_string(dims_) + " are not (B, H, Tq, Tk)");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("masked_softmax: f32 or bf16 only");
    if (x.desc() != plain_md(dims_, dtype_)) throw_usage_error("masked_softmax: plain (canonical) layout only");
  }

  void forward(const Tensor& x, const Tensor& mask, Tensor& y) override {
    const int64_t B = dims_[0], per_batch = dims_[1] * dims_[2], tk = dims_[3];
    DLPERF_ASSERT(mask.dtype() == DType::f32 && mask.numel() == B * tk, "mask is (B, Tk) f32");
    const auto* mk = static_cast<const float*>(cpu(mask).data());
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* in = static_cast<const T*>(cpu(x).data());
      T* out = static_cast<T*>(cpu(y).data());
#pragma omp parallel
      {
        std::vector<float> row(static_cast<size_t>(tk));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < B * per_batch; ++r) {
          const float* m = mk + (r / per_batch) * tk;
          const T* xi = in + r * tk;
          float mx = -INFINITY;
          for (int64_t j = 0; j < tk; ++j) {
            row[j] = to_f32(xi[j]) + m[j];
            mx = std::max(mx, row[j]);
          }
          float sum = 0.0f;
          for (int64_t j = 0; j < tk; ++j) sum += (row[j] = std::exp(row[j] - mx));
          const float inv = 1.0f / sum;
          T* yi = out + r * tk;
          for (int64_t j = 0; j < tk; ++j) yi[j] = from_f32<T>(row[j] * inv);
        }
      }
    });
  }

  void backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    const int64_t rows = dims_[0] * dims_[1] * dims_[2], tk = dims_[3];
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* yp = static_cast<const T*>(cpu(y).data());
      const T* dyp = static_cast<const T*>(cpu(dy).data());
      T* dxp = static_cast<T*>(cpu(dx).data());
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T* yi = yp + r * tk;
        const T* gi = dyp + r * tk;
        float dot = 0.0f;
        for (int64_t j = 0; j < tk; ++j) dot += to_f32(yi[j]) * to_f32(gi[j]);
        T* di = dxp + r * tk;
        for (int64_t j = 0; j < tk; ++j) di[j] = from_f32<T>(to_f32(yi[j]) * (to_f32(gi[j]) - dot));
      }
    });
  }

 private:
  Ctx ctx_;
  Dims dims_;  // (B, H, Tq, Tk)
  DType dtype_;
};

}  // namespace

std::unique_ptr<MaskedSoftmax> make_masked_softmax(Ctx ctx, const Tensor& x) {
  return std::make_unique<CpuMaskedSoftmax>(std::move(ctx), cpu(x));
}

}  // namespace dlperf::onednn
