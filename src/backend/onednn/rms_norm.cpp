// RMSNorm (Zhang & Sennrich 2019), as Llama uses it: y = x * r * w, r = 1 / sqrt(mean(x^2) + eps)
// over the last dim, computed in f32 whatever the data's dtype (f32 or bf16). Hand-written
// OpenMP loops: oneDNN 2.6 has no RMS normalisation, and it is one pass over memory.
//
//   forward   r_i = (sum_j x_ij^2 / C + eps)^-1/2  (saved, one f32 per row), y_ij = x_ij r_i w_j
//   backward  dw_j = sum_i dy_ij x_ij r_i
//             dx_ij = r_i (w_j dy_ij - x_ij r_i^2 / C * sum_k w_k dy_ik x_ik)
// The weight gradient is summed per thread over a fixed split of the rows, then over threads in
// order: the same result for the same thread count.
#include <omp.h>

#include <cmath>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuRmsNorm final : public WithParams<RmsNorm> {
 public:
  CpuRmsNorm(Ctx ctx, const RmsNormSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), dtype_(x.dtype()), eps_(s.eps) {
    const Dims& d = x.dims();
    if (d.size() != 2 || d[1] != s.features || x.desc() != plain_md(d, dtype_))
      throw_usage_error("rms_norm " + s.name + ": input " + to_string(d) + " is not a plain (M, " + std::to_string(s.features) + ")");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("rms_norm " + s.name + ": f32 or bf16 data only");
    m_ = d[0], c_ = d[1];
    record_own_kernel(*ctx_, s.name, "forward_backward", shape_of(d, dtype_));
    rstd_.resize(static_cast<size_t>(m_));
    add_param(ctx_, s.name + ".weight", ParamRole::norm_scale, {c_}, plain_md({c_}, DType::f32));
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, Dims{m_, c_}, dtype_, plain_md({m_, c_}, dtype_)); }

  void forward(const Tensor& x, Tensor& y) override {
    const float* w = weight();
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* xs = static_cast<const T*>(cpu(x).data());
      T* ys = static_cast<T*>(cpu(y).data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m_; ++i) {
        const T* xr = xs + i * c_;
        T* yr = ys + i * c_;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t j = 0; j < c_; ++j) ss += to_f32(xr[j]) * to_f32(xr[j]);
        const float r = 1.0f / std::sqrt(ss / static_cast<float>(c_) + eps_);
        rstd_[static_cast<size_t>(i)] = r;
        for (int64_t j = 0; j < c_; ++j) yr[j] = from_f32<T>(to_f32(xr[j]) * r * w[j]);
      }
    });
  }

  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) override {
    const float* w = weight();
    auto* dw = static_cast<float*>(params_[0].grad().get_data_handle());
    const int nt = omp_get_max_threads();
    std::vector<float> partial(static_cast<size_t>(nt * c_), 0.0f);  // (threads, C)
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* xs = static_cast<const T*>(cpu(x).data());
      const T* dys = static_cast<const T*>(cpu(dy).data());
      T* dxs = static_cast<T*>(cpu(dx).data());
#pragma omp parallel num_threads(nt)
      {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        float* acc = partial.data() + static_cast<int64_t>(t) * c_;
        for (int64_t i = m_ * t / n; i < m_ * (t + 1) / n; ++i) {
          const T* xr = xs + i * c_;
          const T* dyr = dys + i * c_;
          T* dxr = dxs + i * c_;
          const float r = rstd_[static_cast<size_t>(i)];
          float dot = 0.0f;  // sum_k w_k dy_k x_k
#pragma omp simd reduction(+ : dot)
          for (int64_t j = 0; j < c_; ++j) dot += w[j] * to_f32(dyr[j]) * to_f32(xr[j]);
          const float k = r * r * r * dot / static_cast<float>(c_);
          for (int64_t j = 0; j < c_; ++j) {
            const float xv = to_f32(xr[j]), g = to_f32(dyr[j]);
            acc[j] += g * xv * r;
            dxr[j] = from_f32<T>(r * w[j] * g - xv * k);
          }
        }
      }
    });
    for (int64_t j = 0; j < c_; ++j) {
      float s = 0.0f;
      for (int t = 0; t < nt; ++t) s += partial[static_cast<size_t>(t * c_ + j)];
      dw[j] = s;
    }
  }

 private:
  const float* weight() const { return static_cast<const float*>(params_[0].value().get_data_handle()); }

  Ctx ctx_;
  DType dtype_;
  float eps_;
  int64_t m_ = 0, c_ = 0;
  std::vector<float> rstd_;  // (M) 1 / rms of each row, from the last forward
};

}  // namespace

std::unique_ptr<RmsNorm> make_rms_norm(Ctx ctx, const RmsNormSpec& s, const Tensor& x) {
  return std::make_unique<CpuRmsNorm>(std::move(ctx), s, cpu(x));
}

}  // namespace dlperf::onednn
