// SwiGLU's gating (Shazeer 2020, "GLU Variants Improve Transformer"), Llama's feed-forward:
// y = silu(a) * b with a = x W1^T, b = x W3^T; silu(a) = a sigmoid(a). Elementwise, in f32
// whatever the storage dtype; one OpenMP loop each way.
//   da = dy b sigmoid(a) (1 + a (1 - sigmoid(a))),   db = dy silu(a)
#include <cmath>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuSwiGlu final : public SwiGlu {
 public:
  CpuSwiGlu(Ctx ctx, const CpuTensor& a) : ctx_(std::move(ctx)), dims_(a.dims()), dtype_(a.dtype()) {
    if (a.desc() != plain_md(dims_, dtype_)) throw_usage_error("swiglu: input " + to_string(dims_) + " must be plain");
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("swiglu: f32 or bf16 data only");
    record_own_kernel(*ctx_, "swiglu", "forward_backward", shape_of(dims_, dtype_));
  }

  TensorPtr make_output() const override { return std::make_unique<CpuTensor>(ctx_, dims_, dtype_, plain_md(dims_, dtype_)); }

  void forward(const Tensor& a, const Tensor& b, Tensor& y) override {
    const int64_t n = product(dims_);
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* ap = static_cast<const T*>(cpu(a).data());
      const T* bp = static_cast<const T*>(cpu(b).data());
      T* yp = static_cast<T*>(cpu(y).data());
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float av = to_f32(ap[i]);
        yp[i] = from_f32<T>(av / (1.0f + std::exp(-av)) * to_f32(bp[i]));
      }
    });
  }

  void backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) override {
    const int64_t n = product(dims_);
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* ap = static_cast<const T*>(cpu(a).data());
      const T* bp = static_cast<const T*>(cpu(b).data());
      const T* g = static_cast<const T*>(cpu(dy).data());
      T* dap = static_cast<T*>(cpu(da).data());
      T* dbp = static_cast<T*>(cpu(db).data());
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float av = to_f32(ap[i]), bv = to_f32(bp[i]), gv = to_f32(g[i]);
        const float sig = 1.0f / (1.0f + std::exp(-av));
        dap[i] = from_f32<T>(gv * bv * sig * (1.0f + av * (1.0f - sig)));
        dbp[i] = from_f32<T>(gv * av * sig);
      }
    });
  }

 private:
  Ctx ctx_;
  Dims dims_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<SwiGlu> make_swiglu(Ctx ctx, const Tensor& a) { return std::make_unique<CpuSwiGlu>(std::move(ctx), cpu(a)); }

}  // namespace dlperf::onednn
