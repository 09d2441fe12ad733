// Channels-last batch norm in training mode, x viewed as (M = N*H*W, C) rows, fused with the
// residual add and ReLU that follow it in ResNet's bottlenecks:
//   forward   y = act(gamma * (x - mean) * invstd + beta [+ z])          two launches
//   backward  g = act'(y) * dy  (= dz, the residual's gradient)
//             dbeta = sum g,  dgamma = sum g * xhat,
//             dx = gamma * invstd * (g - dbeta / M - xhat * dgamma / M)  two launches
// Used where cuDNN has no fused NHWC kernel (bf16, f32; cuDNN's BN + add + ReLU kernels are f16
// only). Statistics: batch mean and biased variance from sums of (x - shift), shift = the
// channel's first value (no cancellation when |mean| >> std); running variance unbiased, as
// PyTorch and cuDNN keep it. The column reductions run on tiles of 32 channels x row blocks;
// each block writes its partial sums and the last block of a tile to finish (a ticket counter)
// adds the partials in block order in f64: deterministic, no second launch for the totals.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int kTileC = 32;  // channels per block (threadIdx.x)
constexpr int kRowsY = 8;   // row lanes per block (threadIdx.y)

// True in every thread of the block when this block is the last of its tile column to finish.
// Partials written before the call are visible to the last block (fence, then the ticket).
__device__ bool last_block_of_tile(int* counter) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const int ticket = atomicAdd(counter, 1);
    last = ticket == static_cast<int>(gridDim.y) - 1;
    if (last) *counter = 0;  // ready for the next launch (stream order keeps launches apart)
  }
  __syncthreads();
  return last;
}

// Sums two per-thread values over the block's row lanes, fixed order; valid in threadIdx.y == 0.
__device__ void sum_rows(float& a, float& b) {
  __shared__ float sa[kRowsY][kTileC], sb[kRowsY][kTileC];
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int i = 1; i < kRowsY; ++i) {
      a += sa[i][threadIdx.x];
      b += sb[i][threadIdx.x];
    }
  }
  __syncthreads();
}

template <class T>
__global__ void bn_stats(const T* x, int64_t rows, int64_t C, float eps, float momentum, const float* gamma, const float* beta,
                         float* running_mean, float* running_var, float* save_mean, float* save_invstd, float* partial, float* coef,
                         int* counters) {
  const int64_t c = blockIdx.x * int64_t{kTileC} + threadIdx.x;
  const bool valid = c < C;
  const float shift = valid ? load(x, c) : 0.0f;
  float s1 = 0.0f, s2 = 0.0f;
  if (valid)
    for (int64_t r = blockIdx.y * int64_t{kRowsY} + threadIdx.y; r < rows; r += int64_t{gridDim.y} * kRowsY) {
      const float d = load(x, r * C + c) - shift;
      s1 += d;
      s2 += d * d;
    }
  sum_rows(s1, s2);
  if (threadIdx.y == 0 && valid) {
    partial[(2 * int64_t{blockIdx.y}) * C + c] = s1;
    partial[(2 * int64_t{blockIdx.y} + 1) * C + c] = s2;
  }
  if (!last_block_of_tile(&counters[blockIdx.x]) || threadIdx.y != 0 || !valid) return;
  double t1 = 0.0, t2 = 0.0;
  for (unsigned b = 0; b < gridDim.y; ++b) {
    t1 += __ldcg(&partial[(2 * int64_t{b}) * C + c]);
    t2 += __ldcg(&partial[(2 * int64_t{b} + 1) * C + c]);
  }
  const double m = static_cast<double>(rows);
  const double mean_shifted = t1 / m;
  const double var = fmax(t2 / m - mean_shifted * mean_shifted, 0.0);  // biased: the normalisation's
  const double mean = shift + mean_shifted;
  const float invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = invstd;
  const double unbiased = rows > 1 ? var * m / (m - 1.0) : var;
  running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
  const float scale = gamma[c] * invstd;
  coef[c] = scale;
  coef[C + c] = beta[c] - static_cast<float>(mean) * scale;
}

// The elementwise passes move V elements at a time (16 bytes when C % V == 0, else V = 1;
// Pack and for_each_pack in common.cuh): no 64-bit `%` per element (the review's finding 9).
template <class T, int V>
__global__ void bn_apply(const T* x, const T* z, T* y, int64_t packs, int C, const float* coef, bool relu) {
  using P = Pack<T, V>;
  for_each_pack<V>(packs, C, [&](int64_t p, int c) {
    const P xv = reinterpret_cast<const P*>(x)[p];
    P zv{}, out;
    if (z) zv = reinterpret_cast<const P*>(z)[p];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = load(xv.v, k) * coef[c + k] + coef[C + c + k];
      if (z) v += load(zv.v, k);
      store(out.v, k, relu ? fmaxf(v, 0.0f) : v);
    }
    reinterpret_cast<P*>(y)[p] = out;
  });
}

template <class T>
__device__ __forceinline__ float masked_grad(const T* y, const T* dy, int64_t i, bool relu) {
  const float g = load(dy, i);
  return relu ? (load(y, i) > 0.0f ? g : 0.0f) : g;
}

template <class T>
__global__ void bn_bwd_reduce(const T* x, const T* y, const T* dy, T* dz, int64_t rows, int64_t C, const float* gamma,
                              const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta, float* partial, float* coef,
                              int* counters, bool relu) {
  const int64_t c = blockIdx.x * int64_t{kTileC} + threadIdx.x;
  const bool valid = c < C;
  const float mean = valid ? save_mean[c] : 0.0f, invstd = valid ? save_invstd[c] : 0.0f;
  float s1 = 0.0f, s2 = 0.0f;
  if (valid)
    for (int64_t r = blockIdx.y * int64_t{kRowsY} + threadIdx.y; r < rows; r += int64_t{gridDim.y} * kRowsY) {
      const int64_t i = r * C + c;
      const float g = masked_grad(y, dy, i, relu);
      if (dz) store(dz, i, g);
      s1 += g;
      s2 += g * (load(x, i) - mean) * invstd;
    }
  sum_rows(s1, s2);
  if (threadIdx.y == 0 && valid) {
    partial[(2 * int64_t{blockIdx.y}) * C + c] = s1;
    partial[(2 * int64_t{blockIdx.y} + 1) * C + c] = s2;
  }
  if (!last_block_of_tile(&counters[blockIdx.x]) || threadIdx.y != 0 || !valid) return;
  double t1 = 0.0, t2 = 0.0;
  for (unsigned b = 0; b < gridDim.y; ++b) {
    t1 += __ldcg(&partial[(2 * int64_t{b}) * C + c]);
    t2 += __ldcg(&partial[(2 * int64_t{b} + 1) * C + c]);
  }
  dbeta[c] = static_cast<float>(t1);
  dgamma[c] = static_cast<float>(t2);
  const double m = static_cast<double>(rows);
  coef[c] = gamma[c] * invstd;
  coef[C + c] = static_cast<float>(t1 / m);
  coef[2 * C + c] = static_cast<float>(t2 / m);
}

// dx = gamma * invstd * (g - mean(g) - xhat * mean(g * xhat)); g re-read from dz when it was
// stored, else recomputed from dy and y. V elements at a time, as bn_apply.
template <class T, int V>
__global__ void bn_bwd_apply(const T* x, const T* y, const T* dy, const T* dz, T* dx, int64_t packs, int C, const float* save_mean,
                             const float* save_invstd, const float* coef, bool relu) {
  using P = Pack<T, V>;
  for_each_pack<V>(packs, C, [&](int64_t p, int c) {
    const P xv = reinterpret_cast<const P*>(x)[p];
    P gv{}, yv{}, out;
    if (dz) {
      gv = reinterpret_cast<const P*>(dz)[p];
    } else {
      gv = reinterpret_cast<const P*>(dy)[p];
      if (relu) yv = reinterpret_cast<const P*>(y)[p];
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float g = load(gv.v, k);
      if (!dz && relu && !(load(yv.v, k) > 0.0f)) g = 0.0f;
      const float xhat = (load(xv.v, k) - save_mean[c + k]) * save_invstd[c + k];
      store(out.v, k, coef[c + k] * (g - coef[C + c + k] - xhat * coef[2 * C + c + k]));
    }
    reinterpret_cast<P*>(dx)[p] = out;
  });
}

// Calls f(integral_constant<int, V>) with V = 16 bytes of T when every pointer is 16-byte
// aligned and C a multiple of V, else V = 1.
template <class T, class F>
cudaError_t dispatch_pack(int64_t C, std::initializer_list<const void*> ptrs, F&& f) {
  constexpr int kVec = 16 / sizeof(T);
  bool vec = C % kVec == 0;
  for (const void* q : ptrs) vec = vec && reinterpret_cast<std::uintptr_t>(q) % 16 == 0;
  if (vec) return f(std::integral_constant<int, kVec>{});
  return f(std::integral_constant<int, 1>{});
}

}  // namespace

BnNhwcGrid bn_nhwc_grid(int64_t rows, int64_t channels, int sm_count) {
  BnNhwcGrid g;
  g.tiles = static_cast<unsigned>((channels + kTileC - 1) / kTileC);
  // About four blocks per SM in all, at least 64 rows per block, within gridDim.y's limit.
  const int64_t want = (4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1) + g.tiles - 1) / g.tiles;
  const int64_t most = (rows + 63) / 64;
  int64_t rb = want < most ? want : most;
  if (rb < 1) rb = 1;
  if (rb > kMaxGridYZ) rb = kMaxGridYZ;
  g.row_blocks = static_cast<unsigned>(rb);
  return g;
}

cudaError_t launch_bn_nhwc_forward(const void* x, const void* z, void* y, ElemType t, int64_t rows, int64_t channels, BnNhwcGrid grid,
                                   const BnNhwcState& st, float eps, float momentum, bool relu, cudaStream_t s) {
  if (rows == 0 || channels == 0) return cudaSuccess;
  const dim3 blocks(grid.tiles, grid.row_blocks), threads(kTileC, kRowsY);
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    bn_stats<<<blocks, threads, 0, s>>>(static_cast<const T*>(x), rows, channels, eps, momentum, st.gamma, st.beta, st.running_mean,
                                         st.running_var, st.save_mean, st.save_invstd, st.partial, st.coef, st.counters);
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
    return dispatch_pack<T>(channels, {x, z, y}, [&](auto vec) {
      const int64_t packs = rows * channels / vec();
      bn_apply<T, vec()><<<grid_for(packs), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(z), static_cast<T*>(y), packs,
                                                              static_cast<int>(channels), st.coef, relu);
      return launched();
    });
  });
}

cudaError_t launch_bn_nhwc_backward(const void* x, const void* y, const void* dy, void* dx, void* dz, ElemType t, int64_t rows,
                                    int64_t channels, BnNhwcGrid grid, const BnNhwcState& st, float* dgamma, float* dbeta, bool relu,
                                    cudaStream_t s) {
  if (rows == 0 || channels == 0) return cudaSuccess;
  const dim3 blocks(grid.tiles, grid.row_blocks), threads(kTileC, kRowsY);
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    bn_bwd_reduce<<<blocks, threads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
                                              static_cast<T*>(dz), rows, channels, st.gamma, st.save_mean, st.save_invstd, dgamma, dbeta,
                                              st.partial, st.coef, st.counters, relu);
    if (cudaError_t e = launched(); e != cudaSuccess) return e;
    return dispatch_pack<T>(channels, {x, y, dy, dz, dx}, [&](auto vec) {
      const int64_t packs = rows * channels / vec();
      bn_bwd_apply<T, vec()><<<grid_for(packs), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(y),
                                                                  static_cast<const T*>(dy), static_cast<const T*>(dz), static_cast<T*>(dx),
                                                                  packs, static_cast<int>(channels), st.save_mean, st.save_invstd, st.coef,
                                                                  relu);
      return launched();
    });
  });
}

void list_kernels_batch_norm(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, bn_stats, kTileC * kRowsY);
  DLPERF_LIST_FLOAT(out, bn_bwd_reduce, kTileC * kRowsY);
  out.push_back(launch_entry("bn_apply<f32, 4>", &bn_apply<float, 4>, kThreads));
  out.push_back(launch_entry("bn_apply<f16, 8>", &bn_apply<__half, 8>, kThreads));
  out.push_back(launch_entry("bn_apply<bf16, 8>", &bn_apply<__nv_bfloat16, 8>, kThreads));
  out.push_back(launch_entry("bn_apply<bf16, 1>", &bn_apply<__nv_bfloat16, 1>, kThreads));
  out.push_back(launch_entry("bn_bwd_apply<f32, 4>", &bn_bwd_apply<float, 4>, kThreads));
  out.push_back(launch_entry("bn_bwd_apply<f16, 8>", &bn_bwd_apply<__half, 8>, kThreads));
  out.push_back(launch_entry("bn_bwd_apply<bf16, 8>", &bn_bwd_apply<__nv_bfloat16, 8>, kThreads));
  out.push_back(launch_entry("bn_bwd_apply<bf16, 1>", &bn_bwd_apply<__nv_bfloat16, 1>, kThreads));
}

}  // namespace dlperf::cuda
