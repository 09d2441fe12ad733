// Grouped-query causal self-attention on the CUDA backend (backend/ops.h's CausalAttention).
// bf16 and fp16 run cuDNN's fused SDPA (sdpa_graph.h: flash attention, the scores never in
// memory) when it plans and passes its trial run on this GPU and cuDNN. Otherwise, and for
// f32 data, the products run on cuBLAS (tensor cores in tf32/fp16/bf16, f32 accumulation) with
// the causal softmax and its backward in attention_gemm.cu: a fallback that writes the scores
// to memory, recorded with a one-line warning and the reason, and under tf32, bf16 and fp16
// counted on the `kernels:` line as a reference kernel (the run does not measure cuDNN's
// attention). A test that sets AttentionSpec::query_chunk asks for the cuBLAS path.
//
// The cuBLAS path takes queries in chunks of `chunk_` rows [t0, t0 + rows), each against its keys [0, t0 +
// rows) only (the causal mask leaves the rest out), for one query head of every key/value head
// at a time (query head g * group + r of head g: cuBLAS batches over g with one stride):
//   forward   S = Q K^T / sqrt(D)  (f32, kv_heads x rows x keys)
//             P = exp(S - lse), lse = max + log(sum exp) per row (saved)     O = P V
//   backward  delta = rowsum(dO * O); per chunk, last first: S again, P from the saved lse,
//             dV += P^T dO,  dP = dO V^T,  dS = P (dP - delta) / sqrt(D),  dQ = dS K,  dK += dS^T Q
// dK and dV sum over a group's query heads and over chunks: in f32 (the tensors themselves in
// fp32/tf32, else f32 scratch converted at the end). The chunk keeps the score buffers near
// kScoreBudget; the work is the causal half plus the diagonal chunks' upper triangles.
#include <algorithm>
#include <cmath>

#include "backend/cuda/llama_kernels.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/sdpa_graph.h"

namespace dlperf::cuda {
namespace {

constexpr int64_t kDefaultChunk = 1024;               // query rows: products of ~8 GFLOP at Llama's shapes
constexpr size_t kScoreBudget = size_t{1} << 30;      // bytes of S (f32) + P for one chunk

class CudaCausalAttention final : public CausalAttention {
 public:
  CudaCausalAttention(Ctx ctx, const AttentionSpec& s, const CudaTensor& q) : ctx_(std::move(ctx)), s_(s), dtype_(q.dtype()) {
    if (s.batch <= 0 || s.seq_len <= 0 || s.head_dim <= 0)
      throw_usage_error("causal_attention: batch, sequence length and head dim must be positive");
    if (s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
      throw_usage_error("causal_attention: " + std::to_string(s.kv_heads) + " key/value heads do not divide " + std::to_string(s.heads) +
                        " query heads");
    if (s.query_chunk < 0) throw_usage_error("causal_attention: query chunk " + std::to_string(s.query_chunk) + " is negative");
    const Dims want{s.batch * s.seq_len, s.heads * s.head_dim};
    if (q.dims() != want || q.layout() != Layout::canonical || q.padded())
      throw_usage_error("causal_attention: q " + to_string(q.dims()) + " is not a dense " + to_string(want));
    // lse (B, H, T) | delta, cuDNN's row sums (B, H, T): delta starts on 256 bytes as lse does
    // (cuDNN is told every tensor is 16-byte aligned; B x H x T need not be a multiple of 4).
    delta_offset_ = aligned_bytes(static_cast<size_t>(s.batch * s.heads * s.seq_len) * sizeof(float));
    stats_ = ctx_->alloc(2 * delta_offset_);
    const std::string shape = shape_str(want, dtype_) + " kv_heads " + std::to_string(s.kv_heads);
    const SdpaShape fused_shape{s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim, dtype_};
    using Impl = BackendOptions::AttentionImpl;
    std::string why = s.query_chunk > 0                 ? "a query chunk was asked for (the cuBLAS path's tests)"
                      : ctx_->attention == Impl::unfused ? "--attention unfused"
                                                         : sdpa_unsupported(*ctx_, fused_shape);
    if (why.empty()) {
      try {
        fused_ = std::make_unique<FusedSdpa>(*ctx_, fused_shape);
      } catch (const Error& e) {
        why = std::string("cuDNN's fused attention did not plan: ") + e.what();
      }
    }
    if (!fused_ && ctx_->attention == Impl::fused) throw_usage_error("--attention fused: " + why);
    if (fused_) {  // flash-attention kernels: tensor cores (HMMA/GMMA) whatever notes the engine carries
      ctx_->record_kernel("causal_attention", "forward", shape, "cudnn_graph fused SDPA " + fused_->forward_name(), MathUnits::tensor_cores);
      ctx_->record_kernel("causal_attention", "backward", shape, "cudnn_graph fused SDPA " + fused_->backward_name(), MathUnits::tensor_cores);
      return;
    }
    const int64_t t = s.seq_len, g = s.kv_heads;
    const auto es = static_cast<int64_t>(dtype_size(dtype_));
    // rows of S (f32) and P for every key/value head against up to all T keys
    const int64_t row_bytes = g * t * (4 + es);
    int64_t chunk = s.query_chunk > 0 ? s.query_chunk : std::min<int64_t>(kDefaultChunk, static_cast<int64_t>(kScoreBudget) / row_bytes);
    chunk = std::clamp<int64_t>(chunk, 1, t);
    const int64_t chunks = (t + chunk - 1) / chunk;
    chunk_ = (t + chunks - 1) / chunks;  // equal chunks: no short last one
    score_elems_ = static_cast<size_t>(g * chunk_ * t);
    // S, P and the f32 dK/dV sums (dK's, then dV's) each start on 256 bytes: with kv_heads x chunk
    // x T odd, P's 2-byte elements would leave the f32 sums 2-byte aligned (a misaligned-address
    // fault), and cuBLAS takes unvectorised kernels for operands off 16 bytes.
    p_offset_ = aligned_bytes(score_elems_ * sizeof(float));
    sums_offset_ = p_offset_ + aligned_bytes(score_elems_ * static_cast<size_t>(es));
    size_t scratch = sums_offset_;
    if (dtype_ != DType::f32) scratch += 2 * static_cast<size_t>(t * g * s.head_dim) * sizeof(float);  // dK, dV sums
    ctx_->scratch.reserve(scratch);
    const std::string impl = "cublas strided batched QK^T, PV (" + ctx_->gemm_math_name(dtype_) + ") + dlperf:attn_probs, " +
                             std::to_string(chunks) + " query chunk" + (chunks > 1 ? "s" : "") + " of " + std::to_string(chunk_);
    const MathUnits units = dtype_ == DType::f32 && !ctx_->tf32() ? MathUnits::cuda_cores : MathUnits::tensor_cores;
    // Warned about, and under tf32/bf16/fp16 counted on the `kernels:` line (issue 24): cuDNN's
    // fused attention takes no f32 data, and where it does not plan the run measures this.
    if (dtype_ == DType::f32) why = "cuDNN's fused attention takes bf16 or fp16 data";
    why += "; the scores go through memory";
    for (const char* pass : {"forward", "backward"}) ctx_->warn_fallback("causal_attention", pass, shape, impl, why, units, true);
  }

  TensorPtr make_output() const override {
    return std::make_unique<CudaTensor>(ctx_, Dims{s_.batch * s_.seq_len, s_.heads * s_.head_dim}, dtype_, Layout::canonical);
  }

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) override {
    const Ops x{dev(q).data(), dev(k).data(), dev(v).data(), dev(o).data()};
    if (fused_) return fused_->forward(*ctx_, x.q, x.k, x.v, dev(o).data(), lse());
    for (int64_t b = 0; b < s_.batch; ++b)
      for (int64_t t0 = 0; t0 < s_.seq_len; t0 += chunk_)
        for (int64_t r = 0; r < group(); ++r) {
          const AttnChunk c = chunk(b, r, t0);
          scores(c, x.q, x.k);
          DLPERF_CHECK(launch_attn_probs(s_buf(), p_buf(), elem(dtype_), lse(), false, c, ctx_->s()));
          // O (rows x D) = P (rows x keys) V (keys x D)
          gemm_ex(*ctx_, {false, false, c.rows, d(), c.cols, s_.kv_heads}, 1.0f, probs(c), kv(x.v, b), dtype_, 0.0f, queries(x.o, c), dtype_);
        }
  }

  void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dout, Tensor& dq, Tensor& dk,
                Tensor& dv) override {
    const Ops x{dev(q).data(), dev(k).data(), dev(v).data(), dev(o).data()};
    const void* dop = dev(dout).data();
    if (fused_) return fused_->backward(*ctx_, x.q, x.k, x.v, x.o, dop, lse(), delta(), dev(dq).data(), dev(dk).data(), dev(dv).data());
    DLPERF_CHECK(launch_attn_delta(x.o, dop, delta(), elem(dtype_), s_.batch, s_.seq_len, s_.heads, d(), ctx_->s()));
    const bool f32 = dtype_ == DType::f32;
    const int64_t kv_elems = s_.seq_len * s_.kv_heads * d();
    for (int64_t b = 0; b < s_.batch; ++b) {
      // the f32 sums of dK and dV for this batch entry: the tensors themselves in f32
      void* dk_sum = f32 ? at(dev(dk).data(), b * kv_elems) : sums();
      void* dv_sum = f32 ? at(dev(dv).data(), b * kv_elems) : static_cast<float*>(sums()) + kv_elems;
      const GemmOperand dks{dk_sum, s_.kv_heads * d(), d()}, dvs{dv_sum, s_.kv_heads * d(), d()};
      bool first = true;  // the last chunk sees every key: it starts the sums (beta 0)
      for (int64_t t0 = (s_.seq_len - 1) / chunk_ * chunk_; t0 >= 0; t0 -= chunk_)
        for (int64_t r = 0; r < group(); ++r) {
          const AttnChunk c = chunk(b, r, t0);
          const float beta = first ? 0.0f : 1.0f;
          first = false;
          scores(c, x.q, x.k);
          DLPERF_CHECK(launch_attn_probs(s_buf(), p_buf(), elem(dtype_), lse(), true, c, ctx_->s()));
          // dV (keys x D) += P^T dO
          gemm_ex(*ctx_, {true, false, c.cols, d(), c.rows, s_.kv_heads}, 1.0f, probs(c), queries(dop, c), dtype_, beta, dvs, DType::f32);
          // dP (rows x keys) = dO V^T, into S's buffer
          gemm_ex(*ctx_, {false, true, c.rows, c.cols, d(), s_.kv_heads}, 1.0f, queries(dop, c), kv(x.v, b), dtype_, 0.0f, score_operand(c),
                  DType::f32);
          DLPERF_CHECK(launch_attn_dsoftmax(s_buf(), p_buf(), elem(dtype_), delta(), scale(), c, ctx_->s()));
          // dQ (rows x D) = dS K;  dK (keys x D) += dS^T Q
          gemm_ex(*ctx_, {false, false, c.rows, d(), c.cols, s_.kv_heads}, 1.0f, probs(c), kv(x.k, b), dtype_, 0.0f, queries(dev(dq).data(), c),
                  dtype_);
          gemm_ex(*ctx_, {true, false, c.cols, d(), c.rows, s_.kv_heads}, 1.0f, probs(c), queries(x.q, c), dtype_, beta, dks, DType::f32);
        }
      if (!f32) {
        DLPERF_CHECK(launch_convert(dk_sum, ElemType::f32, false, at(dev(dk).data(), b * kv_elems), elem(dtype_), false, 1, kv_elems, 1,
                                    ctx_->s()));
        DLPERF_CHECK(launch_convert(dv_sum, ElemType::f32, false, at(dev(dv).data(), b * kv_elems), elem(dtype_), false, 1, kv_elems, 1,
                                    ctx_->s()));
      }
    }
  }

 private:
  struct Ops {
    const void* q;
    const void* k;
    const void* v;
    const void* o;
  };

  int64_t d() const { return s_.head_dim; }
  int64_t group() const { return s_.heads / s_.kv_heads; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(s_.head_dim)); }
  void* at(const void* p, int64_t elems) const {
    return static_cast<char*>(const_cast<void*>(p)) + elems * static_cast<int64_t>(dtype_size(dtype_));
  }
  AttnChunk chunk(int64_t b, int64_t r, int64_t t0) const {
    AttnChunk c;
    c.seq_len = s_.seq_len, c.heads = s_.heads, c.kv_heads = s_.kv_heads;
    c.b = b, c.r = r, c.t0 = t0;
    c.rows = std::min(chunk_, s_.seq_len - t0);
    c.cols = t0 + c.rows;
    return c;
  }
  // Query-side rows of chunk c (q, o, dout, dq: (B*T, H*D)): head g * group + r, batched over g.
  GemmOperand queries(const void* base, const AttnChunk& c) const {
    return {at(base, ((c.b * s_.seq_len + c.t0) * s_.heads + c.r) * d()), s_.heads * d(), group() * d()};
  }
  // Key/value rows 0.. of batch entry b (k, v: (B*T, kv_heads*D)), batched over g.
  GemmOperand kv(const void* base, int64_t b) const { return {at(base, b * s_.seq_len * s_.kv_heads * d()), s_.kv_heads * d(), d()}; }
  GemmOperand score_operand(const AttnChunk& c) const { return {s_buf(), c.cols, c.rows * c.cols}; }
  GemmOperand probs(const AttnChunk& c) const { return {p_buf(), c.cols, c.rows * c.cols}; }
  // S (rows x keys, f32) = Q K^T / sqrt(D)
  void scores(const AttnChunk& c, const void* q, const void* k) {
    gemm_ex(*ctx_, {false, true, c.rows, c.cols, d(), s_.kv_heads}, scale(), queries(q, c), kv(k, c.b), dtype_, 0.0f, score_operand(c), DType::f32);
  }

  float* s_buf() const { return ctx_->scratch.get<float>(); }
  void* p_buf() const { return ctx_->scratch.get<char>() + p_offset_; }
  void* sums() const { return ctx_->scratch.get<char>() + sums_offset_; }
  float* lse() const { return stats_.as<float>(); }
  float* delta() const { return reinterpret_cast<float*>(stats_.as<char>() + delta_offset_); }
  static size_t aligned_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

  Ctx ctx_;
  AttentionSpec s_;
  DType dtype_;
  int64_t chunk_ = 1;        // query rows per chunk
  size_t score_elems_ = 0;   // kv_heads x chunk x T: S's and P's buffers
  size_t p_offset_ = 0, sums_offset_ = 0;  // bytes into the scratch: P, the dK/dV sums (S at 0)
  size_t delta_offset_ = 0;                // bytes into stats_
  DeviceMemory stats_;
  std::unique_ptr<FusedSdpa> fused_;  // cuDNN's fused SDPA, where it planned
};

}  // namespace

std::unique_ptr<CausalAttention> make_causal_attention(Ctx ctx, const AttentionSpec& s, const Tensor& q) {
  return std::make_unique<CudaCausalAttention>(std::move(ctx), s, dev(q));
}

}  // namespace dlperf::cuda
