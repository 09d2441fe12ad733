// Elementwise kernels: ReLU, tanh and GELU (erf form, as BERT and PyTorch's default use) with
// their backward, the residual add with optional ReLU, ReLU's backward from its output, and
// dropout with a counter-based mask (no mask tensor is stored: backward recomputes it).
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

#define DLPERF_GRID_STRIDE(i, count) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (count); i += int64_t{gridDim.x} * blockDim.x)

constexpr float kSqrt1_2 = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

// Every kernel moves V elements at a time: 16 bytes (V = 16 / sizeof(T)) when the pointers are
// 16-byte aligned and count % V == 0, else V = 1 (dispatch_pack, common.cuh). In-place calls
// (y == x) are fine: each pack is read before it is written.
template <class T, int V>
__global__ void act_fwd(ActKind k, const T* x, T* y, int64_t packs) {
  using P = Pack<T, V>;
  DLPERF_GRID_STRIDE(p, packs) {
    const P xv = reinterpret_cast<const P*>(x)[p];
    P out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = load(xv.v, j);
      // gelu(x) = x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
      float r;
      if (k == ActKind::relu) r = fmaxf(v, 0.0f);
      else if (k == ActKind::gelu) r = 0.5f * v * (1.0f + erff(v * kSqrt1_2));
      else r = tanhf(v);
      store(out.v, j, r);
    }
    reinterpret_cast<P*>(y)[p] = out;
  }
}

template <class T, int V>
__global__ void act_bwd(ActKind k, const T* x, const T* dy, T* dx, int64_t packs) {
  using P = Pack<T, V>;
  DLPERF_GRID_STRIDE(p, packs) {
    const P xv = reinterpret_cast<const P*>(x)[p], gv = reinterpret_cast<const P*>(dy)[p];
    P out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = load(xv.v, j), g = load(gv.v, j);
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
      store(out.v, j, d);
    }
    reinterpret_cast<P*>(dx)[p] = out;
  }
}

template <class T, int V>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t packs, bool relu) {
  using P = Pack<T, V>;
  DLPERF_GRID_STRIDE(p, packs) {
    const P av = reinterpret_cast<const P*>(a)[p], bv = reinterpret_cast<const P*>(b)[p];
    P out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = load(av.v, j) + load(bv.v, j);
      store(out.v, j, relu ? fmaxf(v, 0.0f) : v);
    }
    reinterpret_cast<P*>(y)[p] = out;
  }
}

template <class T, int V>
__global__ void relu_bwd_y(const T* y, const T* dy, T* dx, int64_t packs) {
  using P = Pack<T, V>;
  DLPERF_GRID_STRIDE(p, packs) {
    const P yv = reinterpret_cast<const P*>(y)[p], gv = reinterpret_cast<const P*>(dy)[p];
    P out;
#pragma unroll
    for (int j = 0; j < V; ++j) store(out.v, j, load(yv.v, j) > 0.0f ? load(gv.v, j) : 0.0f);
    reinterpret_cast<P*>(dx)[p] = out;
  }
}

// The mask is per element index i = p * V + j, as with V = 1: the same mask whatever V.
template <class T, int V>
__global__ void dropout_kernel(const T* x, T* y, int64_t packs, float p_drop, float scale, uint64_t seed, const uint64_t* counter) {
  using P = Pack<T, V>;
  // One key per (seed, call); the per-element mix64 spreads neighbouring keys and indices apart.
  const uint64_t key = dropout_key(seed, *counter);
  DLPERF_GRID_STRIDE(p, packs) {
    const P xv = reinterpret_cast<const P*>(x)[p];
    P out;
#pragma unroll
    for (int j = 0; j < V; ++j) store(out.v, j, dropout_keep(key, p * V + j, p_drop) ? load(xv.v, j) * scale : 0.0f);
    reinterpret_cast<P*>(y)[p] = out;
  }
}

__global__ void dropout_advance(uint64_t* counter) { *counter += 1; }

#undef DLPERF_GRID_STRIDE

}  // namespace

cudaError_t launch_dropout_advance(uint64_t* counter, cudaStream_t s) {
  dropout_advance<<<1, 1, 0, s>>>(counter);
  return launched();
}

cudaError_t launch_activation_forward(ActKind k, const void* x, void* y, ElemType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(count, {x, y}, [&](auto v) {
      act_fwd<T, v()><<<grid_for(count / v()), kThreads, 0, s>>>(k, static_cast<const T*>(x), static_cast<T*>(y), count / v());
      return launched();
    });
  });
}

cudaError_t launch_activation_backward(ActKind k, const void* x, const void* dy, void* dx, ElemType t, int64_t count,
                                       cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(count, {x, dy, dx}, [&](auto v) {
      act_bwd<T, v()><<<grid_for(count / v()), kThreads, 0, s>>>(k, static_cast<const T*>(x), static_cast<const T*>(dy),
                                                                  static_cast<T*>(dx), count / v());
      return launched();
    });
  });
}

cudaError_t launch_add(const void* a, const void* b, void* y, ElemType t, int64_t count, bool relu, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(count, {a, b, y}, [&](auto v) {
      add_kernel<T, v()><<<grid_for(count / v()), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y),
                                                                     count / v(), relu);
      return launched();
    });
  });
}

cudaError_t launch_relu_backward_from_y(const void* y, const void* dy, void* dx, ElemType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(count, {y, dy, dx}, [&](auto v) {
      relu_bwd_y<T, v()><<<grid_for(count / v()), kThreads, 0, s>>>(static_cast<const T*>(y), static_cast<const T*>(dy),
                                                                     static_cast<T*>(dx), count / v());
      return launched();
    });
  });
}

cudaError_t launch_dropout(const void* x, void* y, ElemType t, int64_t count, float p, uint64_t seed, const uint64_t* counter,
                           cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(count, {x, y}, [&](auto v) {
      dropout_kernel<T, v()><<<grid_for(count / v()), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), count / v(), p,
                                                                         scale, seed, counter);
      return launched();
    });
  });
}

void list_kernels_eltwise(std::vector<KernelLaunch>& out) {
#define DLPERF_LIST_VEC(kernel)                                                                       \
  out.push_back(launch_entry(#kernel "<f32, 4>", &kernel<float, 4>, kThreads));                       \
  out.push_back(launch_entry(#kernel "<f16, 8>", &kernel<__half, 8>, kThreads));                      \
  out.push_back(launch_entry(#kernel "<bf16, 8>", &kernel<__nv_bfloat16, 8>, kThreads));              \
  out.push_back(launch_entry(#kernel "<f32, 1>", &kernel<float, 1>, kThreads));                       \
  out.push_back(launch_entry(#kernel "<f16, 1>", &kernel<__half, 1>, kThreads));                      \
  out.push_back(launch_entry(#kernel "<bf16, 1>", &kernel<__nv_bfloat16, 1>, kThreads))
  DLPERF_LIST_VEC(act_fwd);
  DLPERF_LIST_VEC(act_bwd);
  DLPERF_LIST_VEC(add_kernel);
  DLPERF_LIST_VEC(relu_bwd_y);
  DLPERF_LIST_VEC(dropout_kernel);
#undef DLPERF_LIST_VEC
  out.push_back(launch_entry("dropout_advance", &dropout_advance, 1));
}

}  // namespace dlperf::cuda
