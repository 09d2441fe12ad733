// Launchers of the CUDA kernels behind Llama's ops (llama_kernels.cu): RMSNorm, RoPE, SwiGLU
// and the large-vocabulary token cross-entropy. Like kernels.h this header is read by nvcc as
// C++17 and names no dlperf C++20 header; every launcher enqueues on the stream and returns
// cudaGetLastError(). All arithmetic is f32 whatever the storage type (f32, bf16, f16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace dlperf::cuda {

// ---- RMSNorm ------------------------------------------------------------------------------
// x (rows, cols) -> y = x * rstd * w, rstd (rows) = 1 / sqrt(mean(x^2) + eps), saved for backward.
// Threads per block of both kernels (one block per row, the block strides over the columns).
constexpr int kRmsThreads = 256;
cudaError_t launch_rms_norm_forward(const void* x, const float* w, void* y, float* rstd, ElemType t, int64_t rows, int64_t cols,
                                    float eps, cudaStream_t s);
// Blocks of the backward: each keeps its own row of dweight partials (blocks, cols) in
// `partial`, summed over the blocks in block order by a second launch (deterministic).
unsigned rms_norm_backward_blocks(int64_t rows, int sm_count);
//   dx = rstd (w dy - x rstd^2 / cols * sum_k w_k dy_k x_k),  dw (cols, f32, overwritten) = sum_rows dy x rstd.
// partial: rms_norm_backward_blocks(rows, sm_count) * cols floats.
cudaError_t launch_rms_norm_backward(const void* x, const void* dy, const float* w, const float* rstd, void* dx, float* dw,
                                     float* partial, unsigned blocks, ElemType t, int64_t rows, int64_t cols, cudaStream_t s);

// ---- RoPE ---------------------------------------------------------------------------------
// in/out (rows = B*T, heads * D): each head's pair (x[2i], x[2i+1]) rotated by sign * angle(t, i),
// t = row mod seq_len; cos/sin tables (seq_len, D/2) f32. sign +1: forward, -1: backward (the
// transpose). out may alias in.
cudaError_t launch_rope(const void* in, void* out, const float* cos_t, const float* sin_t, ElemType t, int64_t rows, int64_t seq_len,
                        int64_t heads, int64_t head_dim, float sign, cudaStream_t s);

// ---- SwiGLU -------------------------------------------------------------------------------
// y = silu(a) * b over count elements.
cudaError_t launch_swiglu_forward(const void* a, const void* b, void* y, ElemType t, int64_t count, cudaStream_t s);
// da = dy b sig(a) (1 + a (1 - sig(a))), db = dy silu(a). da/db may alias a/b (read first).
cudaError_t launch_swiglu_backward(const void* a, const void* b, const void* dy, void* da, void* db, ElemType t, int64_t count,
                                   cudaStream_t s);

// ---- token cross-entropy ------------------------------------------------------------------
// logits (rows, k) dense -> lse (rows) in one pass (online max and sum per row), row_loss
// (2 * rows) scratch, totals[0] = mean of lse - x[label] over counted rows, totals[1] = count.
// A row counts when 0 <= label < k and label != ignore.
constexpr int kTokenXentThreads = 512;
cudaError_t launch_token_xent_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k, int32_t ignore,
                                      float* lse, float* row_loss, float* totals, cudaStream_t s);
// g (rows, k), which may be the logits themselves (each element is read, then written by the
// same thread): g = scale (* *device_scale) / count * (exp(x - lse) - [j == label]); rows that
// do not count get 0.
cudaError_t launch_token_xent_backward(const void* logits, void* g, ElemType t, const int32_t* labels, const float* lse,
                                       const float* totals, int64_t rows, int64_t k, int32_t ignore, float scale,
                                       const float* device_scale, cudaStream_t s);

}  // namespace dlperf::cuda

namespace dlperf::cuda {

// ---- causal grouped-query attention (causal_attention.cu) ---------------------------------
// q, o, dq (B*T, H*D); k, v, dk, dv (B*T, Hkv*D), row-major (B, T, heads, D); query head h reads
// key/value head h / (H / Hkv). lse (B, H, T) f32 from the forward; delta (B, H, T) f32 scratch.
// One warp per query row (forward, dq) or key row (dk, dv), an online softmax over the keys:
// no (T, T) buffer. head_dim <= kAttnMaxHeadDim.
constexpr int64_t kAttnMaxHeadDim = 256;
constexpr int kAttnThreads = 128;  // 4 warps per block
struct AttnArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* dout = nullptr;
  void* out = nullptr;  // o (forward)
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* lse = nullptr;
  float* delta = nullptr;
  int64_t batch = 0, seq_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;  // 1 / sqrt(D)
};
// Blocks of the attention launches over `items` rows (a grid-stride loop covers the rest).
unsigned attention_blocks(int64_t items);
cudaError_t launch_attention_forward(const AttnArgs& a, ElemType t, cudaStream_t s);
cudaError_t launch_attention_backward(const AttnArgs& a, ElemType t, cudaStream_t s);

}  // namespace dlperf::cuda
