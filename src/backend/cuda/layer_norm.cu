// Layer normalisation over the last dimension, x (rows, cols), as BERT uses it:
//   y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps), var biased (/ cols).
// Backward (xhat = (x - mean) * rstd, g = dy * gamma):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma = sum_rows dy * xhat,  dbeta = sum_rows dy.
// Row statistics: one block per row. Parameter gradients: per-chunk partial column sums, then
// a second pass adds the chunks in order (deterministic, no atomics).
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int64_t kChunkRows = 32;  // rows per partial sum of the parameter gradients

template <class T>
__global__ void ln_forward(const T* x, const float* gamma, const float* beta, T* y, float* mean, float* rstd, int64_t cols,
                           float eps) {
  const int64_t r = blockIdx.x;
  const T* xr = x + r * cols;
  T* yr = y + r * cols;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += load(xr, j);
  const float mu = block_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = load(xr, j) - mu;
    sq += d * d;
  }
  const float rs = rsqrtf(block_sum(sq) / static_cast<float>(cols) + eps);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store(yr, j, (load(xr, j) - mu) * rs * gamma[j] + beta[j]);
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

template <class T>
__global__ void ln_backward_data(const T* x, const T* dy, const float* gamma, const float* mean, const float* rstd, T* dx,
                                 int64_t cols) {
  const int64_t r = blockIdx.x;
  const T* xr = x + r * cols;
  const T* dyr = dy + r * cols;
  const float mu = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = load(dyr, j) * gamma[j];
    sg += g;
    sgx += g * (load(xr, j) - mu) * rs;
  }
  const float inv = 1.0f / static_cast<float>(cols);
  const float a = block_sum(sg) * inv, b = block_sum(sgx) * inv;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float xhat = (load(xr, j) - mu) * rs;
    store(dx + r * cols, j, rs * (load(dyr, j) * gamma[j] - a - xhat * b));
  }
}

// partial (chunks, 2, cols): [chunk][0][c] = sum dy * xhat, [chunk][1][c] = sum dy over the chunk's rows.
template <class T>
__global__ void ln_param_partial(const T* x, const T* dy, const float* mean, const float* rstd, float* partial, int64_t rows,
                                 int64_t cols) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const int64_t chunk = blockIdx.y, begin = chunk * kChunkRows;
  const int64_t end = begin + kChunkRows < rows ? begin + kChunkRows : rows;
  float pg = 0.0f, pb = 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    const float d = load(dy, r * cols + c);
    pg += d * (load(x, r * cols + c) - mean[r]) * rstd[r];
    pb += d;
  }
  partial[(chunk * 2) * cols + c] = pg;
  partial[(chunk * 2 + 1) * cols + c] = pb;
}

__global__ void ln_param_total(const float* partial, int64_t chunks, int64_t cols, float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  float g = 0.0f, b = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) {
    g += partial[(k * 2) * cols + c];
    b += partial[(k * 2 + 1) * cols + c];
  }
  dgamma[c] = g;
  dbeta[c] = b;
}

}  // namespace

int64_t layer_norm_partial_rows(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

cudaError_t launch_layer_norm_forward(const void* x, ElemType t, const float* gamma, const float* beta, void* y, float* mean,
                                      float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    ln_forward<<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(static_cast<const T*>(x), gamma, beta, static_cast<T*>(y),
                                                                   mean, rstd, cols, eps);
    return launched();
  });
}

cudaError_t launch_layer_norm_backward(const void* x, const void* dy, ElemType t, const float* gamma, const float* mean,
                                       const float* rstd, void* dx, float* dgamma, float* dbeta, float* partial, int64_t rows,
                                       int64_t cols, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const int64_t chunks = layer_norm_partial_rows(rows);
  const unsigned col_blocks = static_cast<unsigned>((cols + kRowThreads - 1) / kRowThreads);
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    ln_backward_data<<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(xt, dyt, gamma, mean, rstd, static_cast<T*>(dx), cols);
    ln_param_partial<<<dim3(col_blocks, static_cast<unsigned>(chunks)), kRowThreads, 0, s>>>(xt, dyt, mean, rstd, partial, rows,
                                                                                             cols);
    ln_param_total<<<col_blocks, kRowThreads, 0, s>>>(partial, chunks, cols, dgamma, dbeta);
    return launched();
  });
}

}  // namespace dlperf::cuda
