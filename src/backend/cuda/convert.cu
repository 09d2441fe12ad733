// Layout and type conversion kernels: Tensor::read/write (canonical f32 <-> storage),
// Backend::convert, the f32 -> f16/bf16 weight refresh and the (K, C, R, S) -> (K, R, S, C)
// filter reorder; plus fill (the ones vectors of bias-gradient GEMMs) and the bias add of
// convolution and linear layers.
#include <cstdint>

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

// NCHW <-> NHWC (the per-step image conversion of the synthetic and pipelined inputs): a block
// per (n, c) plane, its threads along hw, so the divisions are per plane, not per element
// (the review's finding 9); hw < 2^31.
template <class S, class D>
__global__ void convert_planes_kernel(const S* src, bool src_nhwc, D* dst, bool dst_nhwc, int64_t c, int hw, int64_t planes) {
  for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
    const int64_t n = pl / c, ch = pl % c;
    for (int sp = static_cast<int>(threadIdx.x); sp < hw; sp += static_cast<int>(blockDim.x)) {
      const int64_t i = pl * hw + sp, nhwc_index = (n * hw + sp) * c + ch;
      store(dst, dst_nhwc ? nhwc_index : i, load(src, src_nhwc ? nhwc_index : i));
    }
  }
}

// Filters, (K, C, R, S) <-> (K, R, S, C) with hw = R * S taps (1 or 9 in ResNet-50): a block
// per plane would keep 1 or 9 of its 256 threads busy (the convolutions' weight gradients, one
// conversion per layer and step, took 20 % of ResNet-50's fp16 step that way on an H200). A
// thread per element instead, 32-bit index maths (count <= INT32_MAX / 2, so i + stride cannot
// overflow).
template <class S, class D>
__global__ void convert_taps_kernel(const S* src, bool src_nhwc, D* dst, bool dst_nhwc, int c, int hw, int count) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < count; i += static_cast<int>(gridDim.x * blockDim.x)) {
    const int s = i % hw, ch = (i / hw) % c, n = i / (hw * c);
    const int nhwc_index = (n * hw + s) * c + ch;
    store(dst, dst_nhwc ? nhwc_index : i, load(src, src_nhwc ? nhwc_index : i));
  }
}

// One block per task; the element type of the destination is uniform within a block.
__global__ void cast_segments_kernel(const CastSegment* segments, const CastTask* tasks) {
  const CastTask t = tasks[blockIdx.x];
  const CastSegment g = segments[t.segment];
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
    int64_t o = i;
    if (g.krsc && g.n * g.c * g.hw <= INT32_MAX) {  // (n, c, hw) -> (n, hw, c); a filter: 32-bit index maths
      const int ii = static_cast<int>(i), hw = static_cast<int>(g.hw), c = static_cast<int>(g.c);
      const int s = ii % hw, ch = (ii / hw) % c, n = ii / (hw * c);
      o = (int64_t{n} * hw + s) * c + ch;
    } else if (g.krsc) {
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

// values is read (pack) or written (unpack), words the other way.
template <class H>
__global__ void pack_runs_kernel(const PackRunEntry* runs, const PackTask* tasks, float* values, float* words, bool unpack) {
  const PackTask t = tasks[blockIdx.x];
  const PackRunEntry r = runs[t.run];
  float* w = words + r.word;
  float* v = values + r.value;
  if (!r.narrow) {
    for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
      if (unpack) v[i] = w[i];
      else w[i] = v[i];
    }
    return;
  }
  H* h = reinterpret_cast<H*>(w);
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
    if (unpack) {
      v[i] = load(h, i);
    } else {
      store(h, i, v[i]);
      if (i == r.count - 1 && (r.count & 1)) store(h, i + 1, 0.0f);  // the word's other half: defined bytes on the wire
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

// Channels-last (inner == 1): V elements at a time, the channel stepped (for_each_pack).
template <class T, int V>
__global__ void add_bias_rows_kernel(T* y, const float* bias, int64_t packs, int channels, bool relu) {
  using P = Pack<T, V>;
  for_each_pack<V>(packs, channels, [&](int64_t p, int c) {
    P v = reinterpret_cast<P*>(y)[p];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float o = load(v.v, k) + (bias ? bias[c + k] : 0.0f);
      store(v.v, k, relu ? fmaxf(o, 0.0f) : o);
    }
    reinterpret_cast<P*>(y)[p] = v;
  });
}

// One thread per row (a pixel or a filter tap): rows are a few channels wide.
template <class T>
__global__ void copy_channels_kernel(const T* src, int cs, T* dst, int cd, int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x)
    for (int c = 0; c < cd; ++c) store(dst, r * cd + c, c < cs ? load(src, r * cs + c) : 0.0f);
}

}  // namespace

cudaError_t launch_copy_channels(const void* src, int src_channels, void* dst, int dst_channels, int64_t rows, ElemType t, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    copy_channels_kernel<<<grid_for(rows), kThreads, 0, s>>>(static_cast<const T*>(src), src_channels, static_cast<T*>(dst), dst_channels,
                                                             rows);
    return launched();
  });
}

cudaError_t launch_convert(const void* src, ElemType src_type, bool src_nhwc, void* dst, ElemType dst_type, bool dst_nhwc,
                           int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t count = n * c * hw;
  if (count == 0) return cudaSuccess;
  return dispatch_any(src_type, [&](auto src_tag) {
    using S = decltype(src_tag);
    return dispatch_any(dst_type, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      if ((src_nhwc || dst_nhwc) && hw < 32 && count <= INT32_MAX / 2) {  // fewer taps than a warp: a filter
        convert_taps_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<const S*>(src), src_nhwc, static_cast<D*>(dst), dst_nhwc,
                                                                 static_cast<int>(c), static_cast<int>(hw), static_cast<int>(count));
        return launched();
      }
      if ((src_nhwc || dst_nhwc) && hw <= INT32_MAX) {
        convert_planes_kernel<<<rows_grid(n * c), kThreads, 0, s>>>(static_cast<const S*>(src), src_nhwc, static_cast<D*>(dst), dst_nhwc, c,
                                                                    static_cast<int>(hw), n * c);
        return launched();
      }
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

cudaError_t launch_pack_runs(const PackRunEntry* runs, const PackTask* tasks, int64_t task_count, ElemType narrow_type, float* values,
                             float* words, bool unpack, cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  if (narrow_type == ElemType::f16)
    pack_runs_kernel<__half><<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(runs, tasks, values, words, unpack);
  else
    pack_runs_kernel<__nv_bfloat16><<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(runs, tasks, values, words, unpack);
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
    constexpr int kVec = 16 / sizeof(T);
    if (inner == 1 && channels <= INT32_MAX) {
      if (channels % kVec == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0) {
        add_bias_rows_kernel<T, kVec><<<grid_for(count / kVec), kThreads, 0, s>>>(static_cast<T*>(y), bias, count / kVec,
                                                                                  static_cast<int>(channels), relu);
      } else {
        add_bias_rows_kernel<T, 1><<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(y), bias, count, static_cast<int>(channels), relu);
      }
      return launched();
    }
    add_bias_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(y), bias, count, channels, inner, relu);
    return launched();
  });
}

void list_kernels_convert(std::vector<KernelLaunch>& out) {
  out.push_back(launch_entry("convert_kernel<f32, f16>", &convert_kernel<float, __half>, kThreads));
  out.push_back(launch_entry("convert_kernel<bf16, f32>", &convert_kernel<__nv_bfloat16, float>, kThreads));
  out.push_back(launch_entry("convert_planes_kernel<f32, f16>", &convert_planes_kernel<float, __half>, kThreads));
  out.push_back(launch_entry("convert_planes_kernel<f32, bf16>", &convert_planes_kernel<float, __nv_bfloat16>, kThreads));
  out.push_back(launch_entry("convert_taps_kernel<f16, f32>", &convert_taps_kernel<__half, float>, kThreads));
  out.push_back(launch_entry("convert_taps_kernel<f32, f32>", &convert_taps_kernel<float, float>, kThreads));
  out.push_back(launch_entry("cast_segments_kernel", &cast_segments_kernel, kThreads));
  out.push_back(launch_entry("pack_runs_kernel<f16>", &pack_runs_kernel<__half>, kThreads));
  out.push_back(launch_entry("pack_runs_kernel<bf16>", &pack_runs_kernel<__nv_bfloat16>, kThreads));
  out.push_back(launch_entry("batch_pointers_kernel", &batch_pointers_kernel, kThreads));
  DLPERF_LIST_FLOAT(out, fill_kernel, kThreads);
  DLPERF_LIST_FLOAT(out, fill_uniform_kernel, kThreads);
  DLPERF_LIST_FLOAT(out, add_bias_kernel, kThreads);
  DLPERF_LIST_FLOAT(out, copy_channels_kernel, kThreads);
  out.push_back(launch_entry("add_bias_rows_kernel<f32, 4>", &add_bias_rows_kernel<float, 4>, kThreads));
  out.push_back(launch_entry("add_bias_rows_kernel<f16, 8>", &add_bias_rows_kernel<__half, 8>, kThreads));
  out.push_back(launch_entry("add_bias_rows_kernel<bf16, 1>", &add_bias_rows_kernel<__nv_bfloat16, 1>, kThreads));
}

}  // namespace dlperf::cuda
