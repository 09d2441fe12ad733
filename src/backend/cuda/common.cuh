// Device helpers shared by the backend's kernels: f32 load/store for every element type,
// dispatch from ElemType to the templated kernel, grid sizes and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace dlperf::cuda {

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const int32_t* p, int64_t i) { return static_cast<float>(p[i]); }

__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(int32_t* p, int64_t i, float v) { p[i] = static_cast<int32_t>(rintf(v)); }

// Calls f(T{}) with T the storage type of t: DLPERF_DISPATCH(t, [&](auto tag) { using T = decltype(tag); ... }).
template <class F>
cudaError_t dispatch_float(ElemType t, F&& f) {
  switch (t) {
    case ElemType::f32: return f(float{});
    case ElemType::f16: return f(__half{});
    case ElemType::bf16: return f(__nv_bfloat16{});
    case ElemType::s32: break;
  }
  return cudaErrorInvalidValue;  // s32 is never a compute type
}
template <class F>
cudaError_t dispatch_any(ElemType t, F&& f) {
  if (t == ElemType::s32) return f(int32_t{});
  return dispatch_float(t, static_cast<F&&>(f));
}

// Grid for a grid-stride loop over count elements: enough blocks to fill the GPU, no more.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}
inline cudaError_t launched() { return cudaGetLastError(); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the block, returned to every thread. Fixed reduction order: deterministic.
// Safe to call repeatedly: the leading barrier keeps the previous call's readers ahead of the
// next call's writers. blockDim.x must be a multiple of 32 (at most 1024).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : 0.0f;
    w = warp_sum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : -INFINITY;
    w = warp_max(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

}  // namespace dlperf::cuda
