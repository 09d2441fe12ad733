// Causal grouped-query attention, the CUDA backend's own fallback kernels (cuDNN's fused SDPA
// graph is not wired yet, docs/llm.md): the same algebra as the CPU backend's blocked kernel
// (onednn/causal_attention.cpp), with one key per step of the online softmax:
//   forward   per query row i: m, l, acc over keys j <= i:  s = q_i . k_j / sqrt(D);
//             m' = max(m, s); acc = acc e^(m - m') + e^(s - m') v_j; l = l e^(m - m') + e^(s - m')
//             o_i = acc / l, lse_i = m + log l
//   backward  delta_i = do_i . o_i;  p_ij = exp(q_i . k_j / sqrt(D) - lse_i);  ds_ij = p_ij (do_i . v_j - delta_i)
//             dq_i = sum_j ds_ij k_j / sqrt(D)                       (one warp per query row)
//             dk_j = sum_{h in group, i >= j} ds_ij q_i / sqrt(D),  dv_j = sum p_ij do_i   (one warp per key row)
// Each warp's lanes hold the head's elements lane + 32 e (e < D / 32): the dot products are warp
// sums, fixed order, so the results are deterministic; no two warps write one row (no atomics).
// O(T^2 D) work with no data reuse across rows: correct and memory-lean, far from cuDNN's speed.
#include "backend/cuda/common.cuh"
#include "backend/cuda/llama_kernels.h"

namespace dlperf::cuda {
namespace {

constexpr int kPer = static_cast<int>(kAttnMaxHeadDim / 32);  // elements per lane
constexpr int kWarps = kAttnThreads / 32;

template <class T>
__device__ __forceinline__ void load_row(const T* p, int64_t d, float (&r)[kPer]) {
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t c = threadIdx.x % 32 + 32 * e;
    r[e] = c < d ? load(p, c) : 0.0f;
  }
}

template <class T>
__device__ __forceinline__ float dot_row(const T* p, int64_t d, const float (&r)[kPer]) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t c = threadIdx.x % 32 + 32 * e;
    if (c < d) s += load(p, c) * r[e];
  }
  return warp_sum(s);
}

// Query row item = (b, h, i), i fastest: pointers into the (B*T, heads*D) operands.
struct Row {
  int64_t b, h, i;
};
__device__ __forceinline__ Row split(int64_t item, int64_t seq, int64_t heads) {
  return {item / (heads * seq), (item / seq) % heads, item % seq};
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) attn_fwd(AttnArgs a) {
  const int64_t d = a.head_dim, hd = a.heads * d, kd = a.kv_heads * d, group = a.heads / a.kv_heads;
  const int64_t items = a.batch * a.heads * a.seq_len;
  for (int64_t item = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32; item < items; item += int64_t{gridDim.x} * kWarps) {
    const Row r = split(item, a.seq_len, a.heads);
    const int64_t row = r.b * a.seq_len + r.i;
    float q[kPer], acc[kPer];
    load_row(static_cast<const T*>(a.q) + row * hd + r.h * d, d, q);
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const T* kb = static_cast<const T*>(a.k) + r.b * a.seq_len * kd + (r.h / group) * d;
    const T* vb = static_cast<const T*>(a.v) + r.b * a.seq_len * kd + (r.h / group) * d;
    for (int64_t j = 0; j <= r.i; ++j) {
      const float s = dot_row(kb + j * kd, d, q) * a.scale;
      const float m2 = fmaxf(m, s), c = expf(m - m2), p = expf(s - m2);
      float vv[kPer];
      load_row(vb + j * kd, d, vv);
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] = acc[e] * c + p * vv[e];
      l = l * c + p;
      m = m2;
    }
    T* o = static_cast<T*>(a.out) + row * hd + r.h * d;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t c = threadIdx.x % 32 + 32 * e;
      if (c < d) store(o, c, acc[e] / l);
    }
    if (threadIdx.x % 32 == 0) a.lse[item] = m + logf(l);  // lse (B, H, T): item's order
  }
}

// dq and delta, one warp per query row.
template <class T>
__global__ void __launch_bounds__(kAttnThreads) attn_bwd_dq(AttnArgs a) {
  const int64_t d = a.head_dim, hd = a.heads * d, kd = a.kv_heads * d, group = a.heads / a.kv_heads;
  const int64_t items = a.batch * a.heads * a.seq_len;
  for (int64_t item = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32; item < items; item += int64_t{gridDim.x} * kWarps) {
    const Row r = split(item, a.seq_len, a.heads);
    const int64_t off = (r.b * a.seq_len + r.i) * hd + r.h * d;
    float q[kPer], g[kPer], dq[kPer];
    load_row(static_cast<const T*>(a.q) + off, d, q);
    load_row(static_cast<const T*>(a.dout) + off, d, g);
    const float delta = dot_row(static_cast<const T*>(a.o) + off, d, g), lse = a.lse[item];
#pragma unroll
    for (int e = 0; e < kPer; ++e) dq[e] = 0.0f;
    const T* kb = static_cast<const T*>(a.k) + r.b * a.seq_len * kd + (r.h / group) * d;
    const T* vb = static_cast<const T*>(a.v) + r.b * a.seq_len * kd + (r.h / group) * d;
    for (int64_t j = 0; j <= r.i; ++j) {
      const float p = expf(dot_row(kb + j * kd, d, q) * a.scale - lse);
      const float ds = p * (dot_row(vb + j * kd, d, g) - delta);
      float kk[kPer];
      load_row(kb + j * kd, d, kk);
#pragma unroll
      for (int e = 0; e < kPer; ++e) dq[e] += ds * kk[e];
    }
    T* out = static_cast<T*>(a.dq) + off;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t c = threadIdx.x % 32 + 32 * e;
      if (c < d) store(out, c, dq[e] * a.scale);
    }
    if (threadIdx.x % 32 == 0) a.delta[item] = delta;
  }
}

// dk and dv, one warp per key row (b, g, j): the group's query heads, queries i >= j.
// (kAttnThreads, 1): without the minimum-blocks hint ptxas for sm_90 settled on 72 registers
// and spilled 4 bytes for bf16/fp16, which the build treats as an error.
template <class T>
__global__ void __launch_bounds__(kAttnThreads, 1) attn_bwd_dkv(AttnArgs a) {
  const int64_t d = a.head_dim, hd = a.heads * d, kd = a.kv_heads * d, group = a.heads / a.kv_heads;
  const int64_t items = a.batch * a.kv_heads * a.seq_len;
  for (int64_t item = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32; item < items; item += int64_t{gridDim.x} * kWarps) {
    const Row r = split(item, a.seq_len, a.kv_heads);  // r.h: the key/value head, r.i: the key j
    const int64_t off = (r.b * a.seq_len + r.i) * kd + r.h * d;
    float k[kPer], v[kPer], dk[kPer], dv[kPer];
    load_row(static_cast<const T*>(a.k) + off, d, k);
    load_row(static_cast<const T*>(a.v) + off, d, v);
#pragma unroll
    for (int e = 0; e < kPer; ++e) dk[e] = dv[e] = 0.0f;
    for (int64_t h = r.h * group; h < (r.h + 1) * group; ++h) {
      const int64_t stat = (r.b * a.heads + h) * a.seq_len;  // (B, H, T) row of lse and delta
      for (int64_t i = r.i; i < a.seq_len; ++i) {
        const int64_t qo = (r.b * a.seq_len + i) * hd + h * d;
        const T* qi = static_cast<const T*>(a.q) + qo;
        const T* gi = static_cast<const T*>(a.dout) + qo;
        const float p = expf(dot_row(qi, d, k) * a.scale - a.lse[stat + i]);
        const float ds = p * (dot_row(gi, d, v) - a.delta[stat + i]);
        // Read q_i and do_i element by element rather than into two more kPer arrays: at 256
        // columns those arrays made ptxas spill (the build treats a spill as an error).
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          const int64_t c = threadIdx.x % 32 + 32 * e;
          if (c < d) {
            dk[e] += ds * load(qi, c);
            dv[e] += p * load(gi, c);
          }
        }
      }
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t c = threadIdx.x % 32 + 32 * e;
      if (c < d) {
        store(static_cast<T*>(a.dk) + off, c, dk[e] * a.scale);
        store(static_cast<T*>(a.dv) + off, c, dv[e]);
      }
    }
  }
}

bool valid(const AttnArgs& a) {
  return a.head_dim > 0 && a.head_dim <= kAttnMaxHeadDim && a.kv_heads > 0 && a.heads % a.kv_heads == 0;
}

}  // namespace

unsigned attention_blocks(int64_t items) { return rows_grid((items + kWarps - 1) / kWarps); }

cudaError_t launch_attention_forward(const AttnArgs& a, ElemType t, cudaStream_t s) {
  const int64_t items = a.batch * a.heads * a.seq_len;
  if (items == 0) return cudaSuccess;
  if (!valid(a)) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    attn_fwd<T><<<attention_blocks(items), kAttnThreads, 0, s>>>(a);
    return launched();
  });
}

cudaError_t launch_attention_backward(const AttnArgs& a, ElemType t, cudaStream_t s) {
  const int64_t items = a.batch * a.heads * a.seq_len, kv_items = a.batch * a.kv_heads * a.seq_len;
  if (items == 0) return cudaSuccess;
  if (!valid(a)) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    attn_bwd_dq<T><<<attention_blocks(items), kAttnThreads, 0, s>>>(a);  // writes delta, read below
    const cudaError_t e = launched();
    if (e != cudaSuccess) return e;
    attn_bwd_dkv<T><<<attention_blocks(kv_items), kAttnThreads, 0, s>>>(a);
    return launched();
  });
}

}  // namespace dlperf::cuda
