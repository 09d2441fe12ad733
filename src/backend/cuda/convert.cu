// Layout and type conversion kernels: Tensor::read/write (canonical f32 <-> storage),
// Backend::convert, the f32 -> f16/bf16 weight refresh and the (K, C, R, S) -> (K, R, S, C)
// filter reorder; plus fill (the ones vectors of bias-gradient GEMMs) and the bias add of
// convolution and linear layers.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

// i runs over the canonical (n, c, hw) order; each side maps it to its own storage offset.
template <class S, class D>
__global__ void convert_kernel(const S* src, bool src_nhwc, D* dst, bool dst_nhwc, int64_t c, int64_t hw, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t nhwc_index = i;
    if (src_nhwc || dst_nhwc) {
      const int64_t s = i % hw, ch = (i / hw) % c, n = i / (hw * c);
      nhwc_index = (n * hw + s) * c + ch;
    }
    store(dst, dst_nhwc ? nhwc_index : i, load(src, src_nhwc ? nhwc_index : i));
  }
}

// One block per task; the element type of the destination is uniform within a block.
__global__ void cast_segments_kernel(const CastSegment* segments, const CastTask* tasks) {
  const CastTask t = tasks[blockIdx.x];
  const CastSegment g = segments[t.segment];
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
    int64_t o = i;
    if (g.krsc) {  // (n, c, hw) -> (n, hw, c)
      const int64_t s = i % g.hw, ch = (i / g.hw) % g.c, n = i / (g.hw * g.c);
      o = (n * g.hw + s) * g.c + ch;
    }
    const float v = g.src[i];
    switch (g.type) {
      case ElemType::f16: store(static_cast<__half*>(g.dst), o, v); break;
      case ElemType::bf16: store(static_cast<__nv_bfloat16*>(g.dst), o, v); break;
      default: store(static_cast<float*>(g.dst), o, v); break;
    }
  }
}

__global__ void batch_pointers_kernel(BatchPointers p, int64_t elem_bytes, int64_t images, int64_t heads, void** out) {
  const int64_t batch = images * heads;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < 3 * batch; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i / batch, j = i % batch, b = j / heads, h = j % heads;
    out[i] = const_cast<char*>(static_cast<const char*>(p.base[k])) + (b * p.image_stride[k] + h * p.head_stride[k]) * elem_bytes;
  }
}

template <class T>
__global__ void fill_kernel(T* x, int64_t count, float v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) store(x, i, v);
}

template <class T>
__global__ void fill_uniform_kernel(T* x, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    store(x, i, static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

template <class T>
__global__ void add_bias_kernel(T* y, const float* bias, int64_t count, int64_t channels, int64_t inner, bool relu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load(y, i) + (bias ? bias[(i / inner) % channels] : 0.0f);
    store(y, i, relu ? fmaxf(v, 0.0f) : v);
  }
}

}  // namespace

cudaError_t launch_convert(const void* src, ElemType src_type, bool src_nhwc, void* dst, ElemType dst_type, bool dst_nhwc,
                           int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t count = n * c * hw;
  if (count == 0) return cudaSuccess;
  return dispatch_any(src_type, [&](auto src_tag) {
    using S = decltype(src_tag);
    return dispatch_any(dst_type, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      convert_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<const S*>(src), src_nhwc, static_cast<D*>(dst), dst_nhwc, c,
                                                          hw, count);
      return launched();
    });
  });
}

cudaError_t launch_cast_segments(const CastSegment* segments, const CastTask* tasks, int64_t task_count, cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  cast_segments_kernel<<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(segments, tasks);
  return launched();
}

cudaError_t launch_batch_pointers(const BatchPointers& p, int64_t elem_bytes, int64_t images, int64_t heads, void** out, cudaStream_t s) {
  const int64_t count = 3 * images * heads;
  if (count == 0) return cudaSuccess;
  batch_pointers_kernel<<<grid_for(count), kThreads, 0, s>>>(p, elem_bytes, images, heads, out);
  return launched();
}

cudaError_t launch_fill(void* x, ElemType t, int64_t count, float value, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_any(t, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(x), count, value);
    return launched();
  });
}

cudaError_t launch_fill_uniform(void* x, ElemType t, int64_t count, uint64_t seed, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    fill_uniform_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(x), count, seed);
    return launched();
  });
}

cudaError_t launch_add_bias(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner,
                            cudaStream_t s) {
  return launch_bias_relu(y, t, bias, count, channels, inner, false, s);
}

cudaError_t launch_bias_relu(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner, bool relu,
                             cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(y), bias, count, channels, inner, relu);
    return launched();
  });
}

}  // namespace dlperf::cuda
