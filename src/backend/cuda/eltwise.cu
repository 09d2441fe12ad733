// Elementwise kernels: ReLU, tanh and GELU (erf form, as BERT and PyTorch's default use) with
// their backward, the residual add with optional ReLU, ReLU's backward from its output, and
// dropout with a counter-based mask (no mask tensor is stored: backward recomputes it).
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

#define DLPERF_GRID_STRIDE(i, count) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (count); i += int64_t{gridDim.x} * blockDim.x)

constexpr float kSqrt1_2 = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

template <class T>
__global__ void act_fwd(ActKind k, const T* x, T* y, int64_t count) {
  DLPERF_GRID_STRIDE(i, count) {
    const float v = load(x, i);
    // gelu(x) = x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
    float r;
    if (k == ActKind::relu) r = fmaxf(v, 0.0f);
    else if (k == ActKind::gelu) r = 0.5f * v * (1.0f + erff(v * kSqrt1_2));
    else r = tanhf(v);
    store(y, i, r);
  }
}

template <class T>
__global__ void act_bwd(ActKind k, const T* x, const T* dy, T* dx, int64_t count) {
  DLPERF_GRID_STRIDE(i, count) {
    const float v = load(x, i), g = load(dy, i);
    float d;
    if (k == ActKind::relu) {
      d = v > 0.0f ? g : 0.0f;
    } else if (k == ActKind::tanh) {  // tanh' = 1 - tanh^2
      const float t = tanhf(v);
      d = g * (1.0f - t * t);
    } else {  // gelu'(x) = Phi(x) + x * phi(x)
      const float cdf = 0.5f * (1.0f + erff(v * kSqrt1_2));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
      d = g * (cdf + v * pdf);
    }
    store(dx, i, d);
  }
}

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t count, bool relu) {
  DLPERF_GRID_STRIDE(i, count) {
    const float v = load(a, i) + load(b, i);
    store(y, i, relu ? fmaxf(v, 0.0f) : v);
  }
}

template <class T>
__global__ void relu_bwd_y(const T* y, const T* dy, T* dx, int64_t count) {
  DLPERF_GRID_STRIDE(i, count) { store(dx, i, load(y, i) > 0.0f ? load(dy, i) : 0.0f); }
}

template <class T>
__global__ void dropout_kernel(const T* x, T* y, int64_t count, float p, float scale, uint64_t key) {
  DLPERF_GRID_STRIDE(i, count) { store(y, i, dropout_keep(key, i, p) ? load(x, i) * scale : 0.0f); }
}

#undef DLPERF_GRID_STRIDE

}  // namespace

cudaError_t launch_activation_forward(ActKind k, const void* x, void* y, ElemType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    act_fwd<<<grid_for(count), kThreads, 0, s>>>(k, static_cast<const T*>(x), static_cast<T*>(y), count);
    return launched();
  });
}

cudaError_t launch_activation_backward(ActKind k, const void* x, const void* dy, void* dx, ElemType t, int64_t count,
                                       cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    act_bwd<<<grid_for(count), kThreads, 0, s>>>(k, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx),
                                                 count);
    return launched();
  });
}

cudaError_t launch_add(const void* a, const void* b, void* y, ElemType t, int64_t count, bool relu, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), count,
                                                    relu);
    return launched();
  });
}

cudaError_t launch_relu_backward_from_y(const void* y, const void* dy, void* dx, ElemType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    relu_bwd_y<<<grid_for(count), kThreads, 0, s>>>(static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx),
                                                    count);
    return launched();
  });
}

cudaError_t launch_dropout(const void* x, void* y, ElemType t, int64_t count, float p, uint64_t seed, uint64_t counter,
                           cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  // One key per (seed, call); the per-element mix64 spreads neighbouring keys and indices apart.
  const uint64_t key = dropout_key(seed, counter);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), count, p, scale, key);
    return launched();
  });
}

void list_kernels_eltwise(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, act_fwd, kThreads);
  DLPERF_LIST_FLOAT(out, act_bwd, kThreads);
  DLPERF_LIST_FLOAT(out, add_kernel, kThreads);
  DLPERF_LIST_FLOAT(out, relu_bwd_y, kThreads);
  DLPERF_LIST_FLOAT(out, dropout_kernel, kThreads);
}

}  // namespace dlperf::cuda
