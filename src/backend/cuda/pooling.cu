// Channels-last max pooling, forward and backward (kernels.h, "pooling.cu"). cuDNN's NHWC
// pooling backward took 10.4 ms of VGG16 fp16's 45 ms step on an H200 (batch 128, the first
// 224x224x64 pool; 19 ms for its five pools): it rereads x and y to find each window's maximum.
// Here forward stores the maximum's place in its window (one byte an output element) beside y,
// and backward gathers: every dx pack is written once, by the thread that sums the dy of the
// windows whose maximum it was (at most ceil(k / s)^2 of them). No atomics: deterministic.
// Ties keep the first maximum in the window's row-major order and NaN wins, as PyTorch does.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

// The position (n, oh, ow) or (n, h, w) of pack p of a channels-last array with cp packs a row.
struct Pos {
  int64_t n;
  int h, w;
  int c;  // the pack's first channel
};
__device__ __forceinline__ Pos pos_of(int64_t p, int cp, int V, int H, int W) {
  const int64_t row = p / cp;
  Pos q;
  q.c = static_cast<int>(p - row * cp) * V;
  const int64_t nh = row / W;
  q.w = static_cast<int>(row - nh * W);
  q.n = nh / H;
  q.h = static_cast<int>(nh - q.n * H);
  return q;
}

template <class T, int V>
__global__ void max_pool_fwd(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ arg, MaxPoolShape s, int64_t packs) {
  using P = Pack<T, V>;
  const int cp = s.c / V;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < packs; p += int64_t{gridDim.x} * blockDim.x) {
    const Pos o = pos_of(p, cp, V, s.ho, s.wo);
    const int h0 = o.h * s.stride - s.pad, w0 = o.w * s.stride - s.pad;
    float best[V];
    uint8_t where[V];
#pragma unroll
    for (int k = 0; k < V; ++k) best[k] = -INFINITY, where[k] = 0;
    bool first = true;
    for (int i = 0; i < s.k; ++i) {
      const int h = h0 + i;
      if (h < 0 || h >= s.h) continue;
      for (int j = 0; j < s.k; ++j) {
        const int w = w0 + j;
        if (w < 0 || w >= s.w) continue;
        const P v = reinterpret_cast<const P*>(x)[((o.n * s.h + h) * s.w + w) * cp + o.c / V];
        const auto at = static_cast<uint8_t>(i * s.k + j);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float f = load(v.v, k);
          // the first element in bounds sets the place even when every value is -inf
          if (first || f > best[k] || (isnan(f) && !isnan(best[k]))) best[k] = f, where[k] = at;
        }
        first = false;
      }
    }
    P out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, best[k]);
    reinterpret_cast<P*>(y)[p] = out;
    if constexpr (V == 8) {
      uint2 packed;
      packed.x = where[0] | where[1] << 8 | where[2] << 16 | static_cast<uint32_t>(where[3]) << 24;
      packed.y = where[4] | where[5] << 8 | where[6] << 16 | static_cast<uint32_t>(where[7]) << 24;
      reinterpret_cast<uint2*>(arg)[p] = packed;
    } else if constexpr (V == 4) {
      reinterpret_cast<uint32_t*>(arg)[p] = where[0] | where[1] << 8 | where[2] << 16 | static_cast<uint32_t>(where[3]) << 24;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) arg[p * V + k] = where[k];
    }
  }
}

template <int V>
__device__ __forceinline__ void load_places(const uint8_t* arg, int64_t p, uint8_t (&where)[V]) {
  if constexpr (V == 8) {
    const uint2 q = reinterpret_cast<const uint2*>(arg)[p];
#pragma unroll
    for (int k = 0; k < 4; ++k) where[k] = static_cast<uint8_t>(q.x >> (8 * k)), where[4 + k] = static_cast<uint8_t>(q.y >> (8 * k));
  } else if constexpr (V == 4) {
    const uint32_t q = reinterpret_cast<const uint32_t*>(arg)[p];
#pragma unroll
    for (int k = 0; k < 4; ++k) where[k] = static_cast<uint8_t>(q >> (8 * k));
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) where[k] = arg[p * V + k];
  }
}

template <class T, int V>
__global__ void max_pool_bwd(const T* __restrict__ dy, const uint8_t* __restrict__ arg, T* __restrict__ dx, MaxPoolShape s, int64_t packs) {
  using P = Pack<T, V>;
  const int cp = s.c / V;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < packs; p += int64_t{gridDim.x} * blockDim.x) {
    const Pos in = pos_of(p, cp, V, s.h, s.w);
    // the windows that hold (h, w): oh * stride - pad <= h < oh * stride - pad + k
    const int hp = in.h + s.pad, wp = in.w + s.pad;
    const int oh0 = hp < s.k ? 0 : (hp - s.k) / s.stride + 1, oh1 = min(hp / s.stride, s.ho - 1);
    const int ow0 = wp < s.k ? 0 : (wp - s.k) / s.stride + 1, ow1 = min(wp / s.stride, s.wo - 1);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const auto at = static_cast<uint8_t>((hp - oh * s.stride) * s.k + (wp - ow * s.stride));
        const int64_t q = ((in.n * s.ho + oh) * s.wo + ow) * cp + in.c / V;
        uint8_t where[V];
        load_places<V>(arg, q, where);
        bool any = false;
#pragma unroll
        for (int k = 0; k < V; ++k) any = any || where[k] == at;
        if (!any) continue;  // skips the dy load: with 2x2 windows, three of every four
        const P g = reinterpret_cast<const P*>(dy)[q];
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (where[k] == at) acc[k] += load(g.v, k);
      }
    P out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, acc[k]);
    reinterpret_cast<P*>(dx)[p] = out;
  }
}

// 16-byte packs of T where C and the pointers allow (dispatch_pack, common.cuh) and the place
// array is aligned for V places (8 bytes for V = 8), else one channel a thread.
template <class T>
bool places_aligned(const void* places) {
  return reinterpret_cast<std::uintptr_t>(places) % (16 / sizeof(T)) == 0;
}

}  // namespace

bool max_pool_nhwc_supported(const MaxPoolShape& s) {
  return s.k >= 1 && s.k * s.k <= 256 && s.stride >= 1 && s.pad >= 0 && s.pad < s.k && s.c >= 1 && s.h >= 1 && s.w >= 1 && s.ho >= 1 &&
         s.wo >= 1;
}

cudaError_t launch_max_pool_nhwc_forward(const void* x, void* y, uint8_t* places, ElemType t, const MaxPoolShape& s, cudaStream_t st) {
  const int64_t count = s.n * s.ho * s.wo * s.c;
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(
        s.c, {x, y},
        [&](auto v) {
          const int64_t packs = count / v();
          max_pool_fwd<T, v()><<<grid_for(packs), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), places, s, packs);
          return launched();
        },
        places_aligned<T>(places));
  });
}

cudaError_t launch_max_pool_nhwc_backward(const void* dy, const uint8_t* places, void* dx, ElemType t, const MaxPoolShape& s,
                                          cudaStream_t st) {
  const int64_t count = s.n * s.h * s.w * s.c;
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_pack<T>(
        s.c, {dy, dx},
        [&](auto v) {
          const int64_t packs = count / v();
          max_pool_bwd<T, v()><<<grid_for(packs), kThreads, 0, st>>>(static_cast<const T*>(dy), places, static_cast<T*>(dx), s, packs);
          return launched();
        },
        places_aligned<T>(places));
  });
}

void list_kernels_pooling(std::vector<KernelLaunch>& out) {
  out.push_back(launch_entry("max_pool_fwd<f32, 4>", &max_pool_fwd<float, 4>, kThreads));
  out.push_back(launch_entry("max_pool_fwd<f16, 8>", &max_pool_fwd<__half, 8>, kThreads));
  out.push_back(launch_entry("max_pool_fwd<bf16, 8>", &max_pool_fwd<__nv_bfloat16, 8>, kThreads));
  out.push_back(launch_entry("max_pool_fwd<f16, 1>", &max_pool_fwd<__half, 1>, kThreads));
  out.push_back(launch_entry("max_pool_bwd<f32, 4>", &max_pool_bwd<float, 4>, kThreads));
  out.push_back(launch_entry("max_pool_bwd<f16, 8>", &max_pool_bwd<__half, 8>, kThreads));
  out.push_back(launch_entry("max_pool_bwd<bf16, 8>", &max_pool_bwd<__nv_bfloat16, 8>, kThreads));
  out.push_back(launch_entry("max_pool_bwd<f16, 1>", &max_pool_bwd<__half, 1>, kThreads));
}

}  // namespace dlperf::cuda
