// Attention softmax with BERT's additive padding mask: x (B, H, Tq, Tk) viewed as rows of Tk,
// y = softmax(x + mask[b]) with mask (B, Tk) f32 (0 keep, -10000 drop); backward from y only:
// dx = y * (dy - sum_j dy_j y_j). One block per row, math in f32.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int kRowThreads = 128;  // BERT's Tk = 128: one element per thread

template <class T>
__global__ void msoftmax_fwd(const T* x, const float* mask, T* y, int64_t rows, int64_t tk, int64_t rows_per_batch) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * tk;
    const float* m = mask + (r / rows_per_batch) * tk;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) mx = fmaxf(mx, load(xr, j) + m[j]);
    mx = block_max(mx);
    float se = 0.0f;
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) se += expf(load(xr, j) + m[j] - mx);
    const float inv = 1.0f / block_sum(se);
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) store(y + r * tk, j, expf(load(xr, j) + m[j] - mx) * inv);
  }
}

template <class T>
__global__ void msoftmax_bwd(const T* y, const T* dy, T* dx, int64_t rows, int64_t tk) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * tk;
    const T* dyr = dy + r * tk;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) dot += load(yr, j) * load(dyr, j);
    dot = block_sum(dot);
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) store(dx + r * tk, j, load(yr, j) * (load(dyr, j) - dot));
  }
}

}  // namespace

cudaError_t launch_masked_softmax_forward(const void* x, const float* mask, void* y, ElemType t, int64_t rows, int64_t tk,
                                          int64_t rows_per_batch, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    msoftmax_fwd<<<rows_grid(rows), kRowThreads, 0, s>>>(static_cast<const T*>(x), mask, static_cast<T*>(y), rows, tk,
                                                                     rows_per_batch);
    return launched();
  });
}

cudaError_t launch_masked_softmax_backward(const void* y, const void* dy, void* dx, ElemType t, int64_t rows, int64_t tk,
                                           cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    msoftmax_bwd<<<rows_grid(rows), kRowThreads, 0, s>>>(static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx),
                                                     rows, tk);
    return launched();
  });
}

void list_kernels_masked_softmax(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, msoftmax_fwd, kRowThreads);
  DLPERF_LIST_FLOAT(out, msoftmax_bwd, kRowThreads);
}

}  // namespace dlperf::cuda
