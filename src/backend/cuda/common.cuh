// Device helpers shared by the backend's kernels: f32 load/store for every element type,
// dispatch from ElemType to the templated kernel, grid sizes and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

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

inline cudaError_t launched() { return cudaGetLastError(); }

// The value v takes when stored as T and read back (kernels that keep an intermediate in T use
// the rounded value for what follows, so backward sees what forward used).
template <class T>
__device__ __forceinline__ float rounded(float v) {
  T t[1];
  store(t, 0, v);
  return load(t, 0);
}

// Dropout's mask, shared by the Dropout op and the fused kernels: element i of call `key` is
// kept with probability 1 - p. key = dropout_key(seed, counter) (kernels.h); splitmix64's finaliser is a
// good 64-bit mix, cheap, stateless and the same on every GPU.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ bool dropout_keep(uint64_t key, int64_t i, float p) {
  const uint64_t h = mix64(key + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
  return u >= p;
}

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

// V elements of T moved as one load / store (16 bytes for V = 16 / sizeof(T)).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Calls f(integral_constant<int, V>) with V = 16 bytes of T (one Pack) when n is a multiple of
// V, every pointer is 16-byte aligned and `also` holds (a caller's own condition), else V = 1.
template <class T, class F>
cudaError_t dispatch_pack(int64_t n, std::initializer_list<const void*> ptrs, F&& f, bool also = true) {
  constexpr int kVec = 16 / sizeof(T);
  bool vec = also && n % kVec == 0;
  for (const void* q : ptrs) vec = vec && reinterpret_cast<std::uintptr_t>(q) % 16 == 0;
  if (vec) return f(std::integral_constant<int, kVec>{});
  return f(std::integral_constant<int, 1>{});
}

// A grid-stride loop over the packs of a channels-last (rows, C) array, calling f(p, c) with c
// the pack's first channel (0 <= c < C, a multiple of V; C % V == 0). A thread's channel moves
// by the same step each iteration, so it is stepped rather than recomputed with a 64-bit `%`.
template <int V, class F>
__device__ __forceinline__ void for_each_pack(int64_t packs, int C, F&& f) {
  const int64_t start = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, stride = int64_t{gridDim.x} * blockDim.x;
  const int cp = C / V;
  int c = static_cast<int>(start % cp) * V;
  const int step = static_cast<int>(stride % cp) * V;
  for (int64_t p = start; p < packs; p += stride) {
    f(p, c);
    c += step;
    if (c >= C) c -= C;
  }
}

// One entry of the launch table (kernels.h). DLPERF_LIST_FLOAT lists a kernel template's f32,
// f16 and bf16 instances.
template <class K>
KernelLaunch launch_entry(std::string name, K* kernel, unsigned threads, size_t smem = 0) {
  return {std::move(name), reinterpret_cast<const void*>(kernel), threads, smem};
}
#define DLPERF_LIST_FLOAT(out, kernel, threads)                                   \
  do {                                                                            \
    (out).push_back(launch_entry(#kernel "<f32>", &kernel<float>, (threads)));    \
    (out).push_back(launch_entry(#kernel "<f16>", &kernel<__half>, (threads)));   \
    (out).push_back(launch_entry(#kernel "<bf16>", &kernel<__nv_bfloat16>, (threads))); \
  } while (0)

}  // namespace dlperf::cuda
