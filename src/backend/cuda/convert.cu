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

template <class T>
__global__ void fill_kernel(T* x, int64_t count, float v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) store(x, i, v);
}

template <class T>
__global__ void add_bias_kernel(T* y, const float* bias, int64_t count, int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(y, i) + bias[(i / inner) % channels]);
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

cudaError_t launch_fill(void* x, ElemType t, int64_t count, float value, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_any(t, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(x), count, value);
    return launched();
  });
}

cudaError_t launch_add_bias(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner,
                            cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<<<grid_for(count), kThreads, 0, s>>>(static_cast<T*>(y), bias, count, channels, inner);
    return launched();
  });
}

}  // namespace dlperf::cuda
