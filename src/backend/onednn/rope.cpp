// Rotary position embedding (Su et al. 2021, "RoFormer") as Meta's Llama reference applies it
// (llama/model.py: precompute_freqs_cis, apply_scaling, apply_rotary_emb): each head's
// interleaved pairs (x[2i], x[2i+1]) are one complex number rotated by pos * f_i,
//   f_i = theta^(-2i / D),  i in [0, D/2),  pos = t mod T (every sequence starts at 0),
// with Llama 3.1's rescaling of the frequencies for long context (apply_scaling): wavelength
// l = 2 pi / f; l < original / high_factor keeps f; l > original / low_factor gives f / factor;
// between, s = (original / l - low) / (high - low) blends (1 - s) f / factor + s f.
//   forward   (y0, y1) = (x0 c - x1 s, x0 s + x1 c)
//   backward  (dx0, dx1) = (dy0 c + dy1 s, -dy0 s + dy1 c)   (the inverse rotation)
// The table of cos and sin (T, D/2) is computed once in double and kept in f32.
#include <cmath>
#include <numbers>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuRope final : public Rope {
 public:
  CpuRope(Ctx ctx, const RopeSpec& s, const CpuTensor& x) : ctx_(std::move(ctx)), s_(s), dtype_(x.dtype()) {
    const Dims want{s.batch * s.seq_len, s.heads * s.head_dim};
    if (x.dims() != want || x.desc() != plain_md(want, dtype_))
      throw_usage_error("rope: input " + to_string(x.dims()) + " is not a plain " + to_string(want));
    if (s.head_dim % 2 != 0) throw_usage_error("rope: the head dim " + std::to_string(s.head_dim) + " must be even");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("rope: f32 or bf16 data only");
    record_own_kernel(*ctx_, "rope", "forward_backward", shape_of(want, dtype_));
    const int64_t half = s.head_dim / 2;
    cos_.resize(static_cast<size_t>(s.seq_len * half));
    sin_.resize(cos_.size());
    for (int64_t i = 0; i < half; ++i) {
      const double f = frequency(i);
      for (int64_t t = 0; t < s.seq_len; ++t) {
        const double a = static_cast<double>(t) * f;
        cos_[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(a));
        sin_[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(a));
      }
    }
  }

  void forward(const Tensor& x, Tensor& y) override { rotate(x, y, 1.0f); }
  void backward(const Tensor& dy, Tensor& dx) override { rotate(dy, dx, -1.0f); }

 private:
  // Meta's apply_scaling for one frequency of pair i.
  double frequency(int64_t i) const {
    const double f = std::pow(static_cast<double>(s_.theta), -2.0 * static_cast<double>(i) / static_cast<double>(s_.head_dim));
    if (s_.scale_factor <= 0) return f;
    const double old = static_cast<double>(s_.original_context), lo = s_.low_freq_factor, hi = s_.high_freq_factor;
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen < old / hi) return f;
    if (wavelen > old / lo) return f / s_.scale_factor;
    const double smooth = (old / wavelen - lo) / (hi - lo);
    return (1.0 - smooth) * f / s_.scale_factor + smooth * f;
  }

  // sign +1: rotate by +angle; -1: by -angle (the transpose). out may alias in.
  void rotate(const Tensor& in, Tensor& out, float sign) const {
    const int64_t rows = s_.batch * s_.seq_len, h = s_.heads, half = s_.head_dim / 2, width = h * s_.head_dim;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(cpu(in).data());
      T* dst = static_cast<T*>(cpu(out).data());
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = r % s_.seq_len;
        const float* c = cos_.data() + t * half;
        const float* sn = sin_.data() + t * half;
        for (int64_t hd = 0; hd < h; ++hd) {
          const T* a = src + r * width + hd * s_.head_dim;
          T* b = dst + r * width + hd * s_.head_dim;
          for (int64_t i = 0; i < half; ++i) {
            const float x0 = to_f32(a[2 * i]), x1 = to_f32(a[2 * i + 1]), s = sign * sn[i];
            b[2 * i] = from_f32<T>(x0 * c[i] - x1 * s);
            b[2 * i + 1] = from_f32<T>(x0 * s + x1 * c[i]);
          }
        }
      }
    });
  }

  Ctx ctx_;
  RopeSpec s_;
  DType dtype_;
  std::vector<float> cos_, sin_;  // (T, D/2)
};

}  // namespace

std::unique_ptr<Rope> make_rope(Ctx ctx, const RopeSpec& s, const Tensor& x) { return std::make_unique<CpuRope>(std::move(ctx), s, cpu(x)); }

}  // namespace dlperf::onednn
