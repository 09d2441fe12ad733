// Layer normalisation over the last dimension, x (rows, cols), alone or fused with the dropout
// and residual add in front of it (BERT's sublayer outputs):
//   forward   s = r + dropout(a)  (or s = x)            one launch
//             y = (s - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps), var biased
//   backward  (xhat = (s - mean) * rstd, g = dy * gamma)  one launch
//             ds = rstd * (g - mean(g) - xhat * mean(g * xhat))   -> dr (= ds), da = mask * ds / (1 - p)
//             dgamma = sum_rows dy * xhat,  dbeta = sum_rows dy
// A block walks rows (row = blockIdx.x, += gridDim.x); each thread owns the columns
// threadIdx.x + k * blockDim.x (k < kPerThread) and keeps their dgamma / dbeta partials in
// registers across its rows; the block writes them to `partial` and the last block to finish
// (a ticket counter) adds the blocks' partials in block order: deterministic, no second launch.
// The dropout mask is the Dropout op's (dropout_keep over the (rows, cols) element index), so
// the fused op equals Dropout + Add + LayerNorm with the same seed and call counter.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int kPerThread = 16;  // columns per thread: cols <= 16 * 1024

template <class T>
__global__ void add_norm_fwd(AddNormForward f) {
  const T* a = static_cast<const T*>(f.a);
  const T* r = static_cast<const T*>(f.r);
  T* s = static_cast<T*>(f.s);
  T* y = static_cast<T*>(f.y);
  const int64_t cols = f.cols;
  for (int64_t row = blockIdx.x; row < f.rows; row += gridDim.x) {
    float v[kPerThread];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
      v[k] = 0.0f;
      if (j < cols) {
        const int64_t i = row * cols + j;
        float x = load(a, i);
        if (f.p > 0.0f) x = dropout_keep(f.key, i, f.p) ? x * f.scale : 0.0f;
        if (r) x += load(r, i);
        if (s) {
          x = rounded<T>(x);  // backward normalises the stored s: use what is stored
          store(s, i, x);
        }
        v[k] = x;
        sum += x;
      }
    }
    const float mu = block_sum(sum) / static_cast<float>(cols);
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
      if (j < cols) sq += (v[k] - mu) * (v[k] - mu);
    }
    const float rs = rsqrtf(block_sum(sq) / static_cast<float>(cols) + f.eps);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
      if (j < cols) store(y, row * cols + j, (v[k] - mu) * rs * f.gamma[j] + f.beta[j]);
    }
    if (threadIdx.x == 0) {
      f.mean[row] = mu;
      f.rstd[row] = rs;
    }
  }
}

template <class T>
__global__ void add_norm_bwd(AddNormBackward b) {
  const T* x = static_cast<const T*>(b.x);
  const T* dy = static_cast<const T*>(b.dy);
  T* dx = static_cast<T*>(b.dx);
  T* da = static_cast<T*>(b.da);
  const int64_t cols = b.cols;
  const float inv = 1.0f / static_cast<float>(cols);
  float pg[kPerThread], pb[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) pg[k] = pb[k] = 0.0f;
  for (int64_t row = blockIdx.x; row < b.rows; row += gridDim.x) {
    const float mu = b.mean[row], rs = b.rstd[row];
    float xh[kPerThread], d[kPerThread];
    float sg = 0.0f, sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
      xh[k] = d[k] = 0.0f;
      if (j < cols) {
        const int64_t i = row * cols + j;
        xh[k] = (load(x, i) - mu) * rs;
        d[k] = load(dy, i);
        const float g = d[k] * b.gamma[j];
        sg += g;
        sgx += g * xh[k];
        pg[k] += d[k] * xh[k];
        pb[k] += d[k];
      }
    }
    const float mg = block_sum(sg) * inv, mgx = block_sum(sgx) * inv;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
      if (j < cols) {
        const int64_t i = row * cols + j;
        const float ds = rs * (d[k] * b.gamma[j] - mg - xh[k] * mgx);
        if (dx) store(dx, i, ds);
        if (da) store(da, i, b.p > 0.0f ? (dropout_keep(b.key, i, b.p) ? ds * b.scale : 0.0f) : ds);
      }
    }
  }
  // Parameter gradients: this block's partials, then the last block adds all in block order.
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t j = threadIdx.x + k * int64_t{blockDim.x};
    if (j < cols) {
      b.partial[(2 * int64_t{blockIdx.x}) * cols + j] = pg[k];
      b.partial[(2 * int64_t{blockIdx.x} + 1) * cols + j] = pb[k];
    }
  }
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(b.counter, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) *b.counter = 0;
  }
  __syncthreads();
  if (!last) return;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float tg = 0.0f, tb = 0.0f;
    for (unsigned blk = 0; blk < gridDim.x; ++blk) {
      tg += __ldcg(&b.partial[(2 * int64_t{blk}) * cols + j]);
      tb += __ldcg(&b.partial[(2 * int64_t{blk} + 1) * cols + j]);
    }
    b.dgamma[j] = tg;
    b.dbeta[j] = tb;
  }
}

}  // namespace

AddNormGrid add_norm_grid(int64_t rows, int64_t cols, int sm_count) {
  AddNormGrid g;
  g.threads = cols <= kPerThread * 256 ? 256 : 1024;
  g.supported = cols <= kPerThread * int64_t{g.threads} && cols > 0;
  const int64_t want = 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  g.blocks = static_cast<unsigned>(rows < want ? (rows > 0 ? rows : 1) : want);  // gridDim.x: far below 2^31
  return g;
}

cudaError_t launch_add_norm_forward(const AddNormForward& f, ElemType t, AddNormGrid g, cudaStream_t s) {
  if (f.rows == 0) return cudaSuccess;
  if (!g.supported) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_norm_fwd<T><<<g.blocks, g.threads, 0, s>>>(f);
    return launched();
  });
}

cudaError_t launch_add_norm_backward(const AddNormBackward& b, ElemType t, AddNormGrid g, cudaStream_t s) {
  if (b.rows == 0) return cudaSuccess;
  if (!g.supported) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_norm_bwd<T><<<g.blocks, g.threads, 0, s>>>(b);
    return launched();
  });
}

}  // namespace dlperf::cuda
