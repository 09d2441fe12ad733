// Launchers of the CUDA kernels behind Llama's ops: RMSNorm, RoPE, SwiGLU and the
// large-vocabulary token cross-entropy (llama_kernels.cu), the row passes of causal attention
// (attention_gemm.cu). Like kernels.h this header is read by nvcc as
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
// A row counts when 0 <= label < k and label != ignore. mean_over > 0: the mean (and count)
// divides by mean_over instead (one chunk of a batch's loss: CrossEntropySpec::mean_over).
constexpr int kTokenXentThreads = 512;
cudaError_t launch_token_xent_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k, int32_t ignore,
                                      int64_t mean_over, float* lse, float* row_loss, float* totals, cudaStream_t s);
// g (rows, k), which may be the logits themselves (each element is read, then written by the
// same thread): g = scale (* *device_scale) / count * (exp(x - lse) - [j == label]); rows that
// do not count get 0.
cudaError_t launch_token_xent_backward(const void* logits, void* g, ElemType t, const int32_t* labels, const float* lse,
                                       const float* totals, int64_t rows, int64_t k, int32_t ignore, float scale,
                                       const float* device_scale, cudaStream_t s);

}  // namespace dlperf::cuda

namespace dlperf::cuda {

// ---- causal attention on cuBLAS products (attention_gemm.cu, causal_attention.cpp) --------
// One chunk of query rows [t0, t0 + rows) of batch entry b against keys [0, cols), cols = t0 +
// rows, for query head g * (heads / kv_heads) + r of every key/value head g: the scores S and
// probabilities P are (kv_heads, rows, cols), row-major, one matrix per g.
struct AttnChunk {
  int64_t seq_len = 0, heads = 0, kv_heads = 0;
  int64_t b = 0, r = 0;
  int64_t t0 = 0, rows = 0, cols = 0;
};
// P (in t) = exp(S - lse) on keys <= the row's query, 0 beyond. saved_lse false: the row's lse
// (B, H, T) = max + log(sum exp) is computed and stored; true: the forward's is read.
cudaError_t launch_attn_probs(const float* s, void* p, ElemType t, float* lse, bool saved_lse, const AttnChunk& c, cudaStream_t st);
// dS = P (dP - delta) * scale, written over P (pds); 0 on masked keys.
cudaError_t launch_attn_dsoftmax(const float* dp, void* pds, ElemType t, const float* delta, float scale, const AttnChunk& c, cudaStream_t st);
// delta (B, H, T) = sum over each head's elements of dout * o, both (B*T, H*D).
cudaError_t launch_attn_delta(const void* o, const void* dout, float* delta, ElemType t, int64_t batch, int64_t seq, int64_t heads,
                              int64_t head_dim, cudaStream_t st);

}  // namespace dlperf::cuda
