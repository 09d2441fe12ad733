// Llama's elementwise and row-wise kernels (declared in llama_kernels.h), f32 math for f32,
// bf16 and f16 storage, the same formulas as the CPU backend's loops (onednn/rms_norm.cpp,
// rope.cpp, swiglu.cpp, token_cross_entropy.cpp):
//   RMSNorm   r = (sum x^2 / C + eps)^-1/2;  y = x r w
//             dx = r (w dy - x r^2 / C sum_k w_k dy_k x_k),  dw = sum_rows dy x r
//   RoPE      (y0, y1) = (x0 c - x1 s, x0 s + x1 c), s -> -s for the backward
//   SwiGLU    y = silu(a) b;  da = dy b sig(a) (1 + a (1 - sig(a))),  db = dy silu(a)
//   token CE  lse by an online max/sum (one read of the logits); g = (softmax - onehot) scale / N
// Row kernels use one block per row (grid-stride over rows, so any row count launches) and the
// fixed-order block reductions of common.cuh: the results are deterministic.
#include "backend/cuda/common.cuh"
#include "backend/cuda/llama_kernels.h"

namespace dlperf::cuda {
namespace {

// ---- RMSNorm ----

template <class T>
__global__ void __launch_bounds__(kRmsThreads) rms_fwd(const T* x, const float* w, T* y, float* rstd, int64_t rows, int64_t cols,
                                                       float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = load(xr, j);
      ss += v * v;
    }
    const float rs = rsqrtf(block_sum(ss) / static_cast<float>(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store(yr, j, load(xr, j) * rs * w[j]);
    if (threadIdx.x == 0) rstd[r] = rs;
  }
}

// Block b handles rows b, b + gridDim.x, ... and owns partial row b (cols): thread j's columns
// are touched by that thread only, so no atomics; rms_dw sums the rows in block order.
template <class T>
__global__ void __launch_bounds__(kRmsThreads) rms_bwd(const T* x, const T* dy, const float* w, const float* rstd, T* dx,
                                                       float* partial, int64_t rows, int64_t cols) {
  float* acc = partial + int64_t{blockIdx.x} * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc[j] = 0.0f;
  const float inv = 1.0f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    const T* gr = dy + r * cols;
    T* dxr = dx + r * cols;
    const float rs = rstd[r];
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += w[j] * load(gr, j) * load(xr, j);
    const float k = rs * rs * rs * block_sum(dot) * inv;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float xv = load(xr, j), g = load(gr, j);
      acc[j] += g * xv * rs;
      store(dxr, j, rs * w[j] * g - xv * k);  // dx may alias dy: this thread read dy[j] above
    }
  }
}

__global__ void __launch_bounds__(kThreads) rms_dw(const float* partial, unsigned blocks, int64_t cols, float* dw) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols; j += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (unsigned b = 0; b < blocks; ++b) s += partial[int64_t{b} * cols + j];
    dw[j] = s;
  }
}

// ---- RoPE: one thread per (row, head, pair), grid-stride ----

template <class T>
__global__ void __launch_bounds__(kThreads) rope_kernel(const T* in, T* out, const float* cos_t, const float* sin_t, int64_t rows,
                                                        int64_t seq_len, int64_t heads, int64_t half, float sign) {
  const int64_t n = rows * heads * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e % half, r = e / (heads * half);
    const int64_t t = r % seq_len;
    const float c = cos_t[t * half + i], s = sign * sin_t[t * half + i];
    const int64_t p = 2 * e;  // (r, h, i) -> element r * heads * D + h * D + 2 i = 2 e
    const float x0 = load(in, p), x1 = load(in, p + 1);
    store(out, p, x0 * c - x1 * s);
    store(out, p + 1, x0 * s + x1 * c);
  }
}

// ---- SwiGLU ----

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

template <class T>
__global__ void __launch_bounds__(kThreads) swiglu_fwd(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float av = load(a, i);
    store(y, i, av * sigmoid(av) * load(b, i));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) swiglu_bwd(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float av = load(a, i), bv = load(b, i), g = load(dy, i);
    const float sg = sigmoid(av);
    store(da, i, g * bv * sg * (1.0f + av * (1.0f - sg)));
    store(db, i, g * av * sg);
  }
}

// ---- token cross-entropy ----

__device__ __forceinline__ bool counts(int32_t label, int64_t k, int32_t ignore) { return label != ignore && label >= 0 && label < k; }

template <class T>
__global__ void __launch_bounds__(kTokenXentThreads) xent_fwd(const T* logits, const int32_t* labels, int64_t rows, int64_t k,
                                                              int32_t ignore, float* lse, float* row_loss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * k;
    float m = -INFINITY, s = 0.0f;  // this thread's running max and sum of exp(x - m)
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const float v = load(x, j);
      if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
      } else {
        s += expf(v - m);
      }
    }
    const float mx = block_max(m);
    const float total = block_sum(m == -INFINITY ? 0.0f : s * expf(m - mx));
    if (threadIdx.x == 0) {
      const float l = mx + logf(total);
      lse[r] = l;
      const int32_t label = labels[r];
      const bool counted = counts(label, k, ignore);
      row_loss[r] = counted ? l - load(x, label) : 0.0f;
      row_loss[rows + r] = counted ? 1.0f : 0.0f;
    }
  }
}

// totals = (mean loss, its divisor): the counted rows, or mean_over where that is set.
__global__ void __launch_bounds__(1024) xent_sum(const float* row_loss, int64_t rows, float mean_over, float* totals) {
  float loss = 0.0f, count = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    count += row_loss[rows + r];
  }
  loss = block_sum(loss);
  count = block_sum(count);
  if (threadIdx.x == 0) {
    const float divisor = mean_over > 0.0f ? mean_over : count;
    totals[0] = count > 0.0f ? loss / divisor : 0.0f;
    totals[1] = count > 0.0f ? divisor : 0.0f;
  }
}

template <class T>
__global__ void __launch_bounds__(kTokenXentThreads) xent_bwd(const T* logits, T* g, const int32_t* labels, const float* lse,
                                                              const float* totals, int64_t rows, int64_t k, int32_t ignore, float scale,
                                                              const float* device_scale) {
  const float count = totals[1];
  if (device_scale) scale *= *device_scale;  // the step gate's loss scale, current when the kernel runs
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * k;
    T* gr = g + r * k;
    const int32_t label = labels[r];
    if (!counts(label, k, ignore) || count <= 0.0f) {
      for (int64_t j = threadIdx.x; j < k; j += blockDim.x) store(gr, j, 0.0f);
      continue;
    }
    const float inv = scale / count, l = lse[r];
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      float d = expf(load(x, j) - l);
      if (j == label) d -= 1.0f;
      store(gr, j, d * inv);
    }
  }
}

}  // namespace

cudaError_t launch_rms_norm_forward(const void* x, const float* w, void* y, float* rstd, ElemType t, int64_t rows, int64_t cols,
                                    float eps, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    rms_fwd<T><<<rows_grid(rows), kRmsThreads, 0, s>>>(static_cast<const T*>(x), w, static_cast<T*>(y), rstd, rows, cols, eps);
    return launched();
  });
}

unsigned rms_norm_backward_blocks(int64_t rows, int sm_count) {
  const int64_t want = 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  return static_cast<unsigned>(rows < want ? (rows > 0 ? rows : 1) : want);
}

cudaError_t launch_rms_norm_backward(const void* x, const void* dy, const float* w, const float* rstd, void* dx, float* dw,
                                     float* partial, unsigned blocks, ElemType t, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0) return cudaMemsetAsync(dw, 0, static_cast<size_t>(cols) * sizeof(float), s);
  const cudaError_t e = dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    rms_bwd<T><<<blocks, kRmsThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(dy), w, rstd, static_cast<T*>(dx), partial,
                                              rows, cols);
    return launched();
  });
  if (e != cudaSuccess) return e;
  rms_dw<<<grid_for(cols), kThreads, 0, s>>>(partial, blocks, cols, dw);
  return launched();
}

cudaError_t launch_rope(const void* in, void* out, const float* cos_t, const float* sin_t, ElemType t, int64_t rows, int64_t seq_len,
                        int64_t heads, int64_t head_dim, float sign, cudaStream_t s) {
  const int64_t half = head_dim / 2, n = rows * heads * half;
  if (n == 0) return cudaSuccess;
  if (head_dim % 2 != 0 || seq_len <= 0) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(in), static_cast<T*>(out), cos_t, sin_t, rows, seq_len, heads,
                                                    half, sign);
    return launched();
  });
}

cudaError_t launch_swiglu_forward(const void* a, const void* b, void* y, ElemType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_fwd<T><<<grid_for(count), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), count);
    return launched();
  });
}

cudaError_t launch_swiglu_backward(const void* a, const void* b, const void* dy, void* da, void* db, ElemType t, int64_t count,
                                   cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_bwd<T><<<grid_for(count), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(dy),
                                                       static_cast<T*>(da), static_cast<T*>(db), count);
    return launched();
  });
}

cudaError_t launch_token_xent_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k, int32_t ignore,
                                      int64_t mean_over, float* lse, float* row_loss, float* totals, cudaStream_t s) {
  if (rows == 0) return cudaMemsetAsync(totals, 0, 2 * sizeof(float), s);
  const cudaError_t e = dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    xent_fwd<T><<<rows_grid(rows), kTokenXentThreads, 0, s>>>(static_cast<const T*>(logits), labels, rows, k, ignore, lse, row_loss);
    return launched();
  });
  if (e != cudaSuccess) return e;
  xent_sum<<<1, 1024, 0, s>>>(row_loss, rows, static_cast<float>(mean_over), totals);
  return launched();
}

cudaError_t launch_token_xent_backward(const void* logits, void* g, ElemType t, const int32_t* labels, const float* lse,
                                       const float* totals, int64_t rows, int64_t k, int32_t ignore, float scale,
                                       const float* device_scale, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    xent_bwd<T><<<rows_grid(rows), kTokenXentThreads, 0, s>>>(static_cast<const T*>(logits), static_cast<T*>(g), labels, lse, totals, rows,
                                                              k, ignore, scale, device_scale);
    return launched();
  });
}

void list_kernels_llama(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, rms_fwd, kRmsThreads);
  DLPERF_LIST_FLOAT(out, rms_bwd, kRmsThreads);
  out.push_back(launch_entry("rms_dw", &rms_dw, kThreads));
  DLPERF_LIST_FLOAT(out, rope_kernel, kThreads);
  DLPERF_LIST_FLOAT(out, swiglu_fwd, kThreads);
  DLPERF_LIST_FLOAT(out, swiglu_bwd, kThreads);
  DLPERF_LIST_FLOAT(out, xent_fwd, kTokenXentThreads);
  DLPERF_LIST_FLOAT(out, xent_bwd, kTokenXentThreads);
  out.push_back(launch_entry("xent_sum", &xent_sum, 1024));
}

}  // namespace dlperf::cuda
