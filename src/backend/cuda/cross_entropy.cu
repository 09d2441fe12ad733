// Softmax cross-entropy with label smoothing and ignore_index, math in f32 for any logits
// type. Smoothed target t = (1 - s) onehot(label) + s / K, so per row
//   loss = logsumexp(x) - ((1 - s) x[label] + s / K * sum_j x_j),   dloss/dx_j = softmax_j - t_j,
// averaged over the counted rows. One block per row; the mean is a second, single-block
// kernel with a fixed summation order (deterministic), and stays on the device: only
// SoftmaxCrossEntropy::loss() copies it back.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

__device__ __forceinline__ bool counts(int32_t label, int64_t k, int32_t ignore) { return label != ignore && label >= 0 && label < k; }

template <class T>
__global__ void xent_forward(const T* logits, const int32_t* labels, int64_t rows, int64_t k, int64_t ld, float smoothing, int32_t ignore,
                             float* lse, float* row_loss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * ld;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) mx = fmaxf(mx, load(x, j));
    mx = block_max(mx);
    float se = 0.0f, sx = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const float v = load(x, j);
      se += expf(v - mx);
      sx += v;
    }
    se = block_sum(se);
    sx = block_sum(sx);
    if (threadIdx.x == 0) {
      const float l = mx + logf(se);
      lse[r] = l;
      const int32_t label = labels[r];
      const bool counted = counts(label, k, ignore);
      row_loss[r] = counted ? l - ((1.0f - smoothing) * load(x, label) + smoothing / static_cast<float>(k) * sx) : 0.0f;
      row_loss[rows + r] = counted ? 1.0f : 0.0f;
    }
  }
}

__global__ void xent_total(const float* row_loss, int64_t rows, float* totals) {
  float loss = 0.0f, count = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    count += row_loss[rows + r];
  }
  loss = block_sum(loss);
  count = block_sum(count);
  if (threadIdx.x == 0) {
    totals[0] = count > 0.0f ? loss / count : 0.0f;
    totals[1] = count;
  }
}

template <class T>
__global__ void xent_backward(const T* logits, const int32_t* labels, const float* lse, const float* totals, int64_t rows, int64_t k,
                              int64_t ld, float smoothing, int32_t ignore, float scale, const float* device_scale, T* dlogits) {
  const float count = totals[1];
  if (device_scale) scale *= *device_scale;  // the step gate's loss scale, current at run time
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * ld;
    T* g = dlogits + r * ld;
    const int32_t label = labels[r];
    for (int64_t j = k + threadIdx.x; j < ld; j += blockDim.x) store(g, j, 0.0f);  // padding columns
    if (!counts(label, k, ignore) || count <= 0.0f) {
      for (int64_t j = threadIdx.x; j < k; j += blockDim.x) store(g, j, 0.0f);
      continue;
    }
    const float inv = scale / count, l = lse[r], uniform = smoothing / static_cast<float>(k);
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      float d = expf(load(x, j) - l) - uniform;
      if (j == label) d -= 1.0f - smoothing;
      store(g, j, d * inv);
    }
  }
}

constexpr int kRowThreads = 256;

}  // namespace

cudaError_t launch_cross_entropy_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k, int64_t ld,
                                         float smoothing, int32_t ignore_index, float* lse, float* row_loss, float* totals,
                                         cudaStream_t s) {
  if (rows == 0) return cudaMemsetAsync(totals, 0, 2 * sizeof(float), s);
  const cudaError_t e = dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    xent_forward<<<rows_grid(rows), kRowThreads, 0, s>>>(static_cast<const T*>(logits), labels, rows, k, ld, smoothing,
                                                                     ignore_index, lse, row_loss);
    return launched();
  });
  if (e != cudaSuccess) return e;
  xent_total<<<1, 1024, 0, s>>>(row_loss, rows, totals);
  return launched();
}

cudaError_t launch_cross_entropy_backward(const void* logits, ElemType t, const int32_t* labels, const float* lse,
                                          const float* totals, int64_t rows, int64_t k, int64_t ld, float smoothing, int32_t ignore_index,
                                          float scale, const float* device_scale, void* dlogits, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    xent_backward<<<rows_grid(rows), kRowThreads, 0, s>>>(static_cast<const T*>(logits), labels, lse, totals, rows, k, ld,
                                                                      smoothing, ignore_index, scale, device_scale, static_cast<T*>(dlogits));
    return launched();
  });
}

void list_kernels_cross_entropy(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, xent_forward, kRowThreads);
  DLPERF_LIST_FLOAT(out, xent_backward, kRowThreads);
  out.push_back(launch_entry("xent_total", &xent_total, 1024));
}

}  // namespace dlperf::cuda
