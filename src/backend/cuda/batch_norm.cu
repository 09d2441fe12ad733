// Channels-last batch norm in training mode, x viewed as (M = N*H*W, C) rows, fused with the
// residual add and ReLU that follow it in ResNet's bottlenecks:
//   forward   y = act(gamma * (x - mean) * invstd + beta [+ z])          two launches
//   backward  g = act'(y) * dy  (= dz, the residual's gradient)
//             dbeta = sum g,  dgamma = sum g * xhat,
//             dx = gamma * invstd * (g - dbeta / M - xhat * dgamma / M)  two launches
// Used where cuDNN has no fused NHWC kernel (bf16, f32; cuDNN's BN + add + ReLU kernels are f16
// only). Statistics: batch mean and biased variance from sums of (x - shift), shift = the
// channel's first value (no cancellation when |mean| >> std); running variance unbiased, as
// PyTorch and cuDNN keep it. The column reductions read 16-byte packs (V channels a thread,
// several rows in flight) on tiles of up to 32 packs x row blocks; each block writes its
// partial sums and the last block of a tile to finish (a ticket counter) adds the partials in
// block order in f64: deterministic, no second launch for the totals. (One element a thread,
// 2-byte loads, made this path 2.5x slower than cuDNN's f16 kernels on an H200: ResNet-50 bf16
// b256 spent 44 of its 74 ms step in batch norm, fp16 17 of 45.)
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int kTileC = 32;       // most packs of channels across a block (threadIdx.x)
constexpr int kBnThreads = 256;  // threads of a reduction block: kTileC x 8 rows, or fewer lanes x more rows

// The column reductions' geometry for packs of V channels: lanes (threadIdx.x) across
// min(32, C / V) packs, 256 / lanes row lanes (threadIdx.y), tiles of lanes * V channels.
struct ColTiling {
  int lanes, rows, tiles;
};
__host__ __device__ inline ColTiling col_tiling(int64_t C, int V) {
  const int64_t packs = C / V;
  const int lanes = static_cast<int>(packs < kTileC ? packs : kTileC);
  return {lanes, kBnThreads / lanes, static_cast<int>((packs + lanes - 1) / lanes)};
}

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

// The block's column sums of a and b (V channels per thread) over its row lanes, in a fixed
// order, into partial (2 * row_blocks, C) for this row block; then, in the block that finishes
// its tile last, the totals over row blocks in f64 (block order: deterministic, no second
// launch). Returns true in the threads that hold a channel's totals t1, t2 (channel c).
template <int V>
__device__ bool reduce_columns(const float (&a)[V], const float (&b)[V], int64_t C, float* partial, int* counters, int& c, double& t1,
                               double& t2) {
  __shared__ float sa[kBnThreads * V], sb[kBnThreads * V];
  const int width = blockDim.x * V;  // channels of the tile
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sa[threadIdx.y * width + threadIdx.x * V + k] = a[k];
    sb[threadIdx.y * width + threadIdx.x * V + k] = b[k];
  }
  __syncthreads();
  c = static_cast<int>(blockIdx.x) * width + tid;
  const bool mine = tid < width && c < C;  // one channel of the tile per thread
  if (mine) {
    float u = 0.0f, v = 0.0f;
    for (unsigned y = 0; y < blockDim.y; ++y) {
      u += sa[y * width + tid];
      v += sb[y * width + tid];
    }
    partial[(2 * int64_t{blockIdx.y}) * C + c] = u;
    partial[(2 * int64_t{blockIdx.y} + 1) * C + c] = v;
  }
  if (!last_block_of_tile(&counters[blockIdx.x]) || !mine) return false;
  double p[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};  // four independent chains, combined in a fixed order
  unsigned blk = 0;
  for (; blk + 4 <= gridDim.y; blk += 4)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      p[j] += __ldcg(&partial[(2 * int64_t{blk + j}) * C + c]);
      q[j] += __ldcg(&partial[(2 * int64_t{blk + j} + 1) * C + c]);
    }
  for (; blk < gridDim.y; ++blk) {
    p[0] += __ldcg(&partial[(2 * int64_t{blk}) * C + c]);
    q[0] += __ldcg(&partial[(2 * int64_t{blk} + 1) * C + c]);
  }
  t1 = (p[0] + p[1]) + (p[2] + p[3]);
  t2 = (q[0] + q[1]) + (q[2] + q[3]);
  return true;
}

// Statistics of x, V channels (one 16-byte pack when V > 1) per thread, four rows in flight.
template <class T, int V>
__global__ void __launch_bounds__(kBnThreads) bn_stats(const T* __restrict__ x, int64_t rows, int64_t C, float eps, float momentum,
                                                       const float* gamma, const float* beta, float* running_mean, float* running_var,
                                                       float* save_mean, float* save_invstd, float* partial, float* coef, int* counters) {
  using P = Pack<T, V>;
  const int64_t cp = C / V;
  const int64_t pk = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  float shift[V], s1[V], s2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) shift[k] = s1[k] = s2[k] = 0.0f;
  if (pk < cp) {
    const P* xp = reinterpret_cast<const P*>(x) + pk;
    const P first = xp[0];
#pragma unroll
    for (int k = 0; k < V; ++k) shift[k] = load(first.v, k);
    const int64_t step = int64_t{gridDim.y} * blockDim.y;
    int64_t r = blockIdx.y * int64_t{blockDim.y} + threadIdx.y;
    for (; r + 3 * step < rows; r += 4 * step) {
      P q[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) q[j] = xp[(r + j * step) * cp];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = load(q[j].v, k) - shift[k];
          s1[k] += d;
          s2[k] += d * d;
        }
    }
    for (; r < rows; r += step) {
      const P q = xp[r * cp];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = load(q.v, k) - shift[k];
        s1[k] += d;
        s2[k] += d * d;
      }
    }
  }
  int c;
  double t1, t2;
  if (!reduce_columns<V>(s1, s2, C, partial, counters, c, t1, t2)) return;
  const double m = static_cast<double>(rows);
  const double mean_shifted = t1 / m;
  const double var = fmax(t2 / m - mean_shifted * mean_shifted, 0.0);  // biased: the normalisation's
  const double mean = static_cast<double>(load(x, c)) + mean_shifted;   // the shift: row 0's value
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

// g = act'(y) * dy (stored as dz when dz is not null), and the sums of g and g * xhat; V
// channels per thread, two rows in flight.
template <class T, int V>
__global__ void __launch_bounds__(kBnThreads) bn_bwd_reduce(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy,
                                                            T* __restrict__ dz, int64_t rows, int64_t C, const float* gamma,
                                                            const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
                                                            float* partial, float* coef, int* counters, bool relu) {
  using P = Pack<T, V>;
  const int64_t cp = C / V;
  const int64_t pk = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  float mean[V], invstd[V], s1[V], s2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = invstd[k] = s1[k] = s2[k] = 0.0f;
  if (pk < cp) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      mean[k] = save_mean[pk * V + k];
      invstd[k] = save_invstd[pk * V + k];
    }
    const P* xp = reinterpret_cast<const P*>(x) + pk;
    const P* yp = reinterpret_cast<const P*>(y) + pk;
    const P* dyp = reinterpret_cast<const P*>(dy) + pk;
    P* dzp = dz ? reinterpret_cast<P*>(dz) + pk : nullptr;
    const int64_t step = int64_t{gridDim.y} * blockDim.y;
    for (int64_t r = blockIdx.y * int64_t{blockDim.y} + threadIdx.y; r < rows; r += 2 * step) {
      const bool two = r + step < rows;
      P xv[2], yv[2], gv[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if (j == 1 && !two) break;
        const int64_t o = (r + j * step) * cp;
        xv[j] = xp[o];
        gv[j] = dyp[o];
        if (relu) yv[j] = yp[o];
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if (j == 1 && !two) break;
        P out;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          float g = load(gv[j].v, k);
          if (relu && !(load(yv[j].v, k) > 0.0f)) g = 0.0f;
          store(out.v, k, g);
          s1[k] += g;
          s2[k] += g * (load(xv[j].v, k) - mean[k]) * invstd[k];
        }
        if (dzp) dzp[(r + j * step) * cp] = out;
      }
    }
  }
  int c;
  double t1, t2;
  if (!reduce_columns<V>(s1, s2, C, partial, counters, c, t1, t2)) return;
  dbeta[c] = static_cast<float>(t1);
  dgamma[c] = static_cast<float>(t2);
  const double m = static_cast<double>(rows);
  coef[c] = gamma[c] * save_invstd[c];
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

}  // namespace

BnNhwcGrid bn_nhwc_grid(int64_t rows, int64_t channels, int sm_count) {
  BnNhwcGrid g;
  g.tiles = static_cast<unsigned>((channels + kTileC - 1) / kTileC);  // the most any pack width needs (V = 1)
  // About two blocks per SM over the fewest tiles (16-byte packs of 2-byte elements: 256
  // channels a tile; the backward reduction's 96 registers a thread fit two 256-thread blocks
  // per SM), with four or two 16-byte loads in flight per thread that keeps HBM busy; more row
  // blocks would lengthen the last block's sum over them. At least 64 rows a block, within
  // gridDim.y's limit.
  const int64_t fewest = (channels + kTileC * 8 - 1) / (kTileC * 8);
  const int64_t want = (2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1) + fewest - 1) / fewest;
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
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    cudaError_t e = dispatch_pack<T>(channels, {x}, [&](auto vec) {
      const ColTiling ct = col_tiling(channels, vec());
      bn_stats<T, vec()><<<dim3(ct.tiles, grid.row_blocks), dim3(ct.lanes, ct.rows), 0, s>>>(
          static_cast<const T*>(x), rows, channels, eps, momentum, st.gamma, st.beta, st.running_mean, st.running_var, st.save_mean,
          st.save_invstd, st.partial, st.coef, st.counters);
      return launched();
    });
    if (e != cudaSuccess) return e;
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
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    cudaError_t e = dispatch_pack<T>(channels, {x, y, dy, dz}, [&](auto vec) {
      const ColTiling ct = col_tiling(channels, vec());
      bn_bwd_reduce<T, vec()><<<dim3(ct.tiles, grid.row_blocks), dim3(ct.lanes, ct.rows), 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dz), rows, channels, st.gamma,
          st.save_mean, st.save_invstd, dgamma, dbeta, st.partial, st.coef, st.counters, relu);
      return launched();
    });
    if (e != cudaSuccess) return e;
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
  out.push_back(launch_entry("bn_stats<f32, 4>", &bn_stats<float, 4>, kBnThreads));
  out.push_back(launch_entry("bn_stats<bf16, 8>", &bn_stats<__nv_bfloat16, 8>, kBnThreads));
  out.push_back(launch_entry("bn_stats<f16, 1>", &bn_stats<__half, 1>, kBnThreads));
  out.push_back(launch_entry("bn_bwd_reduce<f32, 4>", &bn_bwd_reduce<float, 4>, kBnThreads));
  out.push_back(launch_entry("bn_bwd_reduce<bf16, 8>", &bn_bwd_reduce<__nv_bfloat16, 8>, kBnThreads));
  out.push_back(launch_entry("bn_bwd_reduce<f16, 1>", &bn_bwd_reduce<__half, 1>, kBnThreads));
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
