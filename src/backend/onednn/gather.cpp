// Row gather, hand-written: y (R, C) = x[idx] for BERT's heads (the masked-LM positions and the
// first token of each sequence). Backward zeroes dx and scatter-adds dy; threads split the
// feature dim, so repeated indices need no atomics and the sum order is fixed.
#include <omp.h>

#include <cstring>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuRowGather final : public RowGather {
 public:
  CpuRowGather(Ctx ctx, const CpuTensor& x, const CpuTensor& idx) : ctx_(std::move(ctx)), dtype_(x.dtype()) {
    record_own_kernel(*ctx_, "gather_rows", "forward_backward", shape_of(x.dims(), dtype_) + " [" + std::to_string(idx.numel()) + "]");
    if (x.dims().size() != 2 || x.desc() != plain_md(x.dims(), dtype_))
      throw_usage_error("gather_rows: x " + to_string(x.dims()) + " must be a plain (M, C) matrix");
    if (idx.dtype() != DType::s32 || idx.dims().size() != 1) throw_usage_error("gather_rows: indices must be (R) s32");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("gather_rows: f32 or bf16 only");
    m_ = x.dims()[0], c_ = x.dims()[1], r_ = idx.dims()[0];
  }

  TensorPtr make_output() const override {
    const Dims d{r_, c_};
    return std::make_unique<CpuTensor>(ctx_, d, dtype_, plain_md(d, dtype_));
  }

  void forward(const Tensor& x, const Tensor& idx, Tensor& y) override {
    const int32_t* id = check(idx);
    const size_t row = static_cast<size_t>(c_) * dtype_size(dtype_);
    const auto* src = static_cast<const char*>(cpu(x).data());
    auto* dst = static_cast<char*>(cpu(y).data());
    for (int64_t r = 0; r < r_; ++r) std::memcpy(dst + static_cast<size_t>(r) * row, src + static_cast<size_t>(id[r]) * row, row);
  }

  void backward(const Tensor& idx, const Tensor& dy, Tensor& dx) override {
    const int32_t* id = check(idx);
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* d = static_cast<const T*>(cpu(dy).data());
      T* g = static_cast<T*>(cpu(dx).data());
      std::memset(g, 0, static_cast<size_t>(m_ * c_) * sizeof(T));
#pragma omp parallel
      {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t j0 = c_ * t / nt, j1 = c_ * (t + 1) / nt;
        for (int64_t r = 0; r < r_; ++r) {
          T* out = g + static_cast<int64_t>(id[r]) * c_;
          const T* in = d + r * c_;
          for (int64_t j = j0; j < j1; ++j) out[j] = from_f32<T>(to_f32(out[j]) + to_f32(in[j]));
        }
      }
    });
  }

 private:
  const int32_t* check(const Tensor& idx) const {
    DLPERF_ASSERT(idx.numel() == r_, "gather indices of the planned shape");
    const auto* id = static_cast<const int32_t*>(cpu(idx).data());
    for (int64_t r = 0; r < r_; ++r)
      if (id[r] < 0 || id[r] >= m_)
        throw_usage_error("gather_rows: row index " + std::to_string(id[r]) + " is outside [0, " + std::to_string(m_) + ")");
    return id;
  }

  Ctx ctx_;
  DType dtype_;
  int64_t m_ = 0, c_ = 0, r_ = 0;
};

}  // namespace

std::unique_ptr<RowGather> make_gather_rows(Ctx ctx, const Tensor& x, const Tensor& idx) {
  return std::make_unique<CpuRowGather>(std::move(ctx), cpu(x), cpu(idx));
}

}  // namespace dlperf::onednn
