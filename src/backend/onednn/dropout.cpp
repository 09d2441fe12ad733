// Dropout, hand-written: y = x * mask / (1 - p). The mask comes from a counter-based
// generator (SplitMix64 of seed, call counter and element index, as Philox does in cuRAND's
// and PyTorch's dropout), so it needs no sequential state: any thread computes any element,
// the same seed gives the same masks, and the result does not depend on the thread count.
// The mask is kept as bytes for backward: dx = dy * mask / (1 - p).
#include <cstring>
#include <utility>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class CpuDropout final : public Dropout {
 public:
  CpuDropout(Ctx ctx, float p, const CpuTensor& x) : ctx_(std::move(ctx)), p_(p), dtype_(x.dtype()), n_(x.numel()) {
    record_own_kernel(*ctx_, "dropout", "forward_backward", shape_of(x.dims(), dtype_));
    if (!(p >= 0.0f && p < 1.0f)) throw_usage_error("dropout probability must be in [0, 1) (got " + std::to_string(p) + ")");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("dropout: f32 or bf16 data only");
    if (x.desc() != plain_md(x.dims(), dtype_)) throw_usage_error("dropout: plain (canonical) layout only");
    if (p_ > 0.0f) {
      mask_charge_ = Charge(ctx_->budget, n_);
      mask_.resize(static_cast<size_t>(n_));
    }
    // keep an element when its 24-bit uniform draw is below (1 - p) * 2^24
    threshold_ = static_cast<uint32_t>((1.0 - static_cast<double>(p_)) * 16777216.0);
  }

  void repeat_last_mask() override { repeat_ = true; }

  void forward(const Tensor& x, Tensor& y, uint64_t seed) override {
    const uint64_t call = std::exchange(repeat_, false) ? calls_ : ++calls_;
    if (p_ == 0.0f) {
      if (cpu(x).data() != cpu(y).data()) std::memcpy(cpu(y).data(), cpu(x).data(), static_cast<size_t>(n_) * dtype_size(dtype_));
      return;
    }
    const uint64_t key = mix(seed ^ mix(call * 0x9E3779B97F4A7C15ull));
    const float scale = 1.0f / (1.0f - p_);
    uint8_t* m = mask_.data();
    const uint32_t thr = threshold_;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* in = static_cast<const T*>(cpu(x).data());
      T* out = static_cast<T*>(cpu(y).data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const uint8_t keep = static_cast<uint32_t>(mix(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) >> 40) < thr;
        m[i] = keep;
        out[i] = from_f32<T>(keep ? to_f32(in[i]) * scale : 0.0f);
      }
    });
  }

  void backward(const Tensor& dy, Tensor& dx) override {
    if (p_ == 0.0f) {
      if (cpu(dy).data() != cpu(dx).data()) std::memcpy(cpu(dx).data(), cpu(dy).data(), static_cast<size_t>(n_) * dtype_size(dtype_));
      return;
    }
    const float scale = 1.0f / (1.0f - p_);
    const uint8_t* m = mask_.data();
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* in = static_cast<const T*>(cpu(dy).data());
      T* out = static_cast<T*>(cpu(dx).data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n_; ++i) out[i] = from_f32<T>(m[i] ? to_f32(in[i]) * scale : 0.0f);
    });
  }

 private:
  Ctx ctx_;
  float p_;
  DType dtype_;
  int64_t n_;
  uint32_t threshold_ = 0;
  uint64_t calls_ = 0;
  bool repeat_ = false;  // repeat_last_mask(): the next forward reuses calls_
  Charge mask_charge_;         // the mask's bytes, as a tensor's are charged
  std::vector<uint8_t> mask_;  // 1 keep, 0 drop: the last forward's mask
};

}  // namespace

std::unique_ptr<Dropout> make_dropout(Ctx ctx, float p, const Tensor& x) { return std::make_unique<CpuDropout>(std::move(ctx), p, cpu(x)); }

}  // namespace dlperf::onednn
