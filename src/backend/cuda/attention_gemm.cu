// The element-wise and row passes of causal attention on cuBLAS products (llama_kernels.h,
// causal_attention.cpp): the causal softmax of one chunk of score rows, its backward, and
// delta = rowsum(dO * O). One block a score row; the order of every sum is fixed
// (block_sum / block_max), so the results are deterministic.
#include "backend/cuda/common.cuh"
#include "backend/cuda/llama_kernels.h"

namespace dlperf::cuda {
namespace {

constexpr int kRowThreads = 256;

// Score row `row` of the chunk: (kv head g, query row i), query t = t0 + i of head g * group + r;
// its keys 0..t count (causal), keys t+1..cols-1 are masked.
struct ScoreRow {
  int64_t t, stat;  // the query position; its index in the (B, H, T) statistics
};
__device__ __forceinline__ ScoreRow score_row(const AttnChunk& c, int64_t row) {
  const int64_t g = row / c.rows, i = row - g * c.rows;
  const int64_t h = g * (c.heads / c.kv_heads) + c.r;
  const int64_t t = c.t0 + i;
  return {t, (c.b * c.heads + h) * c.seq_len + t};
}

// p = exp(s - lse) over keys <= t, 0 beyond; without kSaved the row's lse = max + log(sum exp)
// is computed here and stored, with it the forward's is read.
template <class T, bool kSaved>
__global__ void __launch_bounds__(kRowThreads) attn_probs(const float* __restrict__ s, T* __restrict__ p, float* lse, AttnChunk c) {
  for (int64_t row = blockIdx.x; row < c.kv_heads * c.rows; row += gridDim.x) {
    const ScoreRow q = score_row(c, row);
    const float* sr = s + row * c.cols;
    T* pr = p + row * c.cols;
    const int64_t n = q.t + 1;
    float l;
    if constexpr (kSaved) {
      l = lse[q.stat];
    } else {
      float m = -INFINITY;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, sr[j]);
      m = block_max(m);
      float sum = 0.0f;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(sr[j] - m);
      sum = block_sum(sum);
      l = m + logf(sum);
      if (threadIdx.x == 0) lse[q.stat] = l;
    }
    for (int64_t j = threadIdx.x; j < c.cols; j += blockDim.x) store(pr, j, j < n ? expf(sr[j] - l) : 0.0f);
  }
}

// ds = p (dp - delta) * scale over keys <= t, 0 beyond; p is read from pds and ds written over it.
template <class T>
__global__ void __launch_bounds__(kRowThreads) attn_dsoftmax(const float* __restrict__ dp, T* __restrict__ pds, const float* __restrict__ delta,
                                                             float scale, AttnChunk c) {
  for (int64_t row = blockIdx.x; row < c.kv_heads * c.rows; row += gridDim.x) {
    const ScoreRow q = score_row(c, row);
    const float* dr = dp + row * c.cols;
    T* pr = pds + row * c.cols;
    const float dl = delta[q.stat];
    for (int64_t j = threadIdx.x; j < c.cols; j += blockDim.x) store(pr, j, j <= q.t ? load(pr, j) * (dr[j] - dl) * scale : 0.0f);
  }
}

// delta (B, H, T) = sum over the head's D elements of dO * O; one warp a (b, t, h) row.
template <class T>
__global__ void __launch_bounds__(kRowThreads) attn_delta(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta,
                                                          int64_t batch, int64_t seq, int64_t heads, int64_t d) {
  const int64_t rows = batch * seq * heads;
  const int warps = kRowThreads / 32;
  for (int64_t row = int64_t{blockIdx.x} * warps + threadIdx.x / 32; row < rows; row += int64_t{gridDim.x} * warps) {
    float acc = 0.0f;
    for (int64_t e = threadIdx.x % 32; e < d; e += 32) acc += load(o, row * d + e) * load(dout, row * d + e);
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0) {
      const int64_t h = row % heads, bt = row / heads, t = bt % seq, b = bt / seq;
      delta[(b * heads + h) * seq + t] = acc;
    }
  }
}

}  // namespace

cudaError_t launch_attn_probs(const float* s, void* p, ElemType t, float* lse, bool saved_lse, const AttnChunk& c, cudaStream_t st) {
  const int64_t rows = c.kv_heads * c.rows;
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (saved_lse)
      attn_probs<T, true><<<rows_grid(rows), kRowThreads, 0, st>>>(s, static_cast<T*>(p), lse, c);
    else
      attn_probs<T, false><<<rows_grid(rows), kRowThreads, 0, st>>>(s, static_cast<T*>(p), lse, c);
    return launched();
  });
}

cudaError_t launch_attn_dsoftmax(const float* dp, void* pds, ElemType t, const float* delta, float scale, const AttnChunk& c, cudaStream_t st) {
  const int64_t rows = c.kv_heads * c.rows;
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    attn_dsoftmax<T><<<rows_grid(rows), kRowThreads, 0, st>>>(dp, static_cast<T*>(pds), delta, scale, c);
    return launched();
  });
}

cudaError_t launch_attn_delta(const void* o, const void* dout, float* delta, ElemType t, int64_t batch, int64_t seq, int64_t heads,
                              int64_t head_dim, cudaStream_t st) {
  const int64_t rows = batch * seq * heads;
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    attn_delta<T><<<rows_grid((rows + kRowThreads / 32 - 1) / (kRowThreads / 32)), kRowThreads, 0, st>>>(
        static_cast<const T*>(o), static_cast<const T*>(dout), delta, batch, seq, heads, head_dim);
    return launched();
  });
}

void list_kernels_attention_gemm(std::vector<KernelLaunch>& out) {
  out.push_back(launch_entry("attn_probs<f32, lse>", &attn_probs<float, false>, kRowThreads));
  out.push_back(launch_entry("attn_probs<f16, lse>", &attn_probs<__half, false>, kRowThreads));
  out.push_back(launch_entry("attn_probs<bf16, lse>", &attn_probs<__nv_bfloat16, false>, kRowThreads));
  out.push_back(launch_entry("attn_probs<f32, saved>", &attn_probs<float, true>, kRowThreads));
  out.push_back(launch_entry("attn_probs<f16, saved>", &attn_probs<__half, true>, kRowThreads));
  out.push_back(launch_entry("attn_probs<bf16, saved>", &attn_probs<__nv_bfloat16, true>, kRowThreads));
  DLPERF_LIST_FLOAT(out, attn_dsoftmax, kRowThreads);
  DLPERF_LIST_FLOAT(out, attn_delta, kRowThreads);
}

}  // namespace dlperf::cuda
