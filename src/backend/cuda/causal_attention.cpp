// Grouped-query causal self-attention on the CUDA backend (backend/ops.h's CausalAttention):
// dlperf's own warp-per-row online-softmax kernels (causal_attention.cu). cuDNN's fused SDPA
// (graph API) is the fast path this is a stand-in for: every plan records the kernels as a
// fallback and warns once (under tf32/bf16/fp16 they count as reference kernels on the
// `kernels:` line, like any CUDA-core fallback), so no run mistakes it for cuDNN's speed.
#include <cmath>

#include "backend/cuda/llama_kernels.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

class CudaCausalAttention final : public CausalAttention {
 public:
  CudaCausalAttention(Ctx ctx, const AttentionSpec& s, const CudaTensor& q) : ctx_(std::move(ctx)), s_(s), dtype_(q.dtype()) {
    if (s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
      throw_usage_error("causal_attention: " + std::to_string(s.kv_heads) + " key/value heads do not divide " + std::to_string(s.heads) +
                        " query heads");
    if (s.head_dim <= 0 || s.head_dim > kAttnMaxHeadDim)
      throw_usage_error("causal_attention: head dim " + std::to_string(s.head_dim) + " is not in [1, " + std::to_string(kAttnMaxHeadDim) +
                        "] (the CUDA kernels' limit)");
    const Dims want{s.batch * s.seq_len, s.heads * s.head_dim};
    if (q.dims() != want || q.layout() != Layout::canonical || q.padded())
      throw_usage_error("causal_attention: q " + to_string(q.dims()) + " is not a dense " + to_string(want));
    const size_t stats = static_cast<size_t>(s.batch * s.heads * s.seq_len);
    stats_ = ctx_->alloc(2 * stats * sizeof(float));  // lse (B, H, T) | delta (B, H, T)
    const std::string shape = shape_str(want, dtype_) + " kv_heads " + std::to_string(s.kv_heads);
    const std::string why = "cuDNN's fused attention (SDPA graph) is not wired in dlperf yet";
    ctx_->warn_fallback("causal_attention", "forward", shape, "dlperf:causal_attention_rowwise", why, MathUnits::cuda_cores);
    ctx_->warn_fallback("causal_attention", "backward", shape, "dlperf:causal_attention_rowwise", why, MathUnits::cuda_cores);
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{s_.batch * s_.seq_len, s_.heads * s_.head_dim}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) override {
    AttnArgs a = args();
    a.q = dev(q).data();
    a.k = dev(k).data();
    a.v = dev(v).data();
    a.out = dev(o).data();
    DLPERF_CHECK(launch_attention_forward(a, elem(dtype_), ctx_->s()));
  }

  void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dout, Tensor& dq, Tensor& dk,
                Tensor& dv) override {
    AttnArgs a = args();
    a.q = dev(q).data();
    a.k = dev(k).data();
    a.v = dev(v).data();
    a.o = dev(o).data();
    a.dout = dev(dout).data();
    a.dq = dev(dq).data();
    a.dk = dev(dk).data();
    a.dv = dev(dv).data();
    DLPERF_CHECK(launch_attention_backward(a, elem(dtype_), ctx_->s()));
  }

 private:
  AttnArgs args() const {
    AttnArgs a;
    a.batch = s_.batch;
    a.seq_len = s_.seq_len;
    a.heads = s_.heads;
    a.kv_heads = s_.kv_heads;
    a.head_dim = s_.head_dim;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s_.head_dim));
    a.lse = stats_.as<float>();
    a.delta = stats_.as<float>() + s_.batch * s_.heads * s_.seq_len;
    return a;
  }

  Ctx ctx_;
  AttentionSpec s_;
  DType dtype_;
  DeviceMemory stats_;
};

}  // namespace

std::unique_ptr<CausalAttention> make_causal_attention(Ctx ctx, const AttentionSpec& s, const Tensor& q) {
  return std::make_unique<CudaCausalAttention>(std::move(ctx), s, dev(q));
}

}  // namespace dlperf::cuda
