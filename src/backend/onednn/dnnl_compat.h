// The one place that knows which oneDNN API it is built against: 3.x (Debian 13's 3.7, Spack's
// default) and 2.x (Debian 12's 2.6.3, from 2.6 on). Op files build every primitive descriptor
// through these functions and never test DNNL_VERSION_MAJOR themselves.
//
// What differs: oneDNN 3 removed the operation descriptors (convolution_forward::desc and
// friends): a primitive_desc is built from the engine and the problem in one call, with the
// engine first. Eltwise, batch and layer normalisation take a dst (or diff_dst) desc of their
// own; pooling takes a dilation (0: none); post-op eltwise lost its scale argument; output
// scales became per-argument scales given at execution. memory::desc's dims() and data_type()
// became get_dims() and get_data_type().
//
// A new op adds its primitive here (both branches, same argument order: engine, then the
// problem as the 3.x constructor names it, then the forward hint, then attr) and calls it.
// Arguments are data descs as oneDNN names them: for an in-place-shaped backward, diff_src,
// diff_dst and src are usually the same desc.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <vector>

namespace dlperf::onednn::compat {

using md = dnnl::memory::desc;
using dims = dnnl::memory::dims;

inline constexpr bool kOneDnn3 = DNNL_VERSION_MAJOR >= 3;

// ---- memory descriptors ---------------------------------------------------------------------
inline dims md_dims(const md& d) {
#if DNNL_VERSION_MAJOR >= 3
  return d.get_dims();
#else
  return d.dims();
#endif
}
inline dnnl::memory::data_type md_data_type(const md& d) {
#if DNNL_VERSION_MAJOR >= 3
  return d.get_data_type();
#else
  return d.data_type();
#endif
}

// ---- attributes -----------------------------------------------------------------------------
// A post-op eltwise (ReLU after a convolution, ...) with the given alpha and beta.
inline void append_eltwise(dnnl::post_ops& po, dnnl::algorithm alg, float alpha = 0.0f, float beta = 0.0f) {
#if DNNL_VERSION_MAJOR >= 3
  po.append_eltwise(alg, alpha, beta);
#else
  po.append_eltwise(1.0f, alg, alpha, beta);
#endif
}

// dst = alpha * (the primitive's result), fixed at plan time. 2.x: output scales. 3.x has no
// output scales; its scales are per input and given as a memory at execution, which would make
// every caller pass an extra argument: a linear post-op (alpha * x + 0) fuses the same multiply
// into the kernel's epilogue and keeps the call sites as they are. Appends to attr's post-ops.
inline void scale_output(dnnl::primitive_attr& attr, float alpha) {
#if DNNL_VERSION_MAJOR >= 3
  dnnl::post_ops po = attr.get_post_ops();
  po.append_eltwise(dnnl::algorithm::eltwise_linear, alpha, 0.0f);
  attr.set_post_ops(po);
#else
  attr.set_output_scales(0, {alpha});
#endif
}

// dst += (the primitive's result): a sum post-op, the same call in 2.x and 3.x.
inline dnnl::primitive_attr sum_attr() {
  dnnl::post_ops po;
  po.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

// ---- convolution (direct, forward_training) -------------------------------------------------
// bias: a zero desc (md{}) for none; padding symmetric.
inline dnnl::convolution_forward::primitive_desc conv_forward(const dnnl::engine& eng, const md& src, const md& wei, const md& bias,
                                                              const md& dst, const dims& stride, const dims& pad,
                                                              const dnnl::primitive_attr& attr = {}) {
  const auto prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  return bias.is_zero() ? dnnl::convolution_forward::primitive_desc(eng, prop, alg, src, wei, dst, stride, pad, pad, attr)
                        : dnnl::convolution_forward::primitive_desc(eng, prop, alg, src, wei, bias, dst, stride, pad, pad, attr);
#else
  auto d = bias.is_zero() ? dnnl::convolution_forward::desc(prop, alg, src, wei, dst, stride, pad, pad)
                          : dnnl::convolution_forward::desc(prop, alg, src, wei, bias, dst, stride, pad, pad);
  return dnnl::convolution_forward::primitive_desc(d, attr, eng);
#endif
}

inline dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const dnnl::engine& eng, const md& src, const md& diff_wei, const md& diff_bias, const md& diff_dst, const dims& stride,
    const dims& pad, const dnnl::convolution_forward::primitive_desc& hint) {
  const auto alg = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  return diff_bias.is_zero()
             ? dnnl::convolution_backward_weights::primitive_desc(eng, alg, src, diff_wei, diff_dst, stride, pad, pad, hint)
             : dnnl::convolution_backward_weights::primitive_desc(eng, alg, src, diff_wei, diff_bias, diff_dst, stride, pad, pad, hint);
#else
  auto d = diff_bias.is_zero() ? dnnl::convolution_backward_weights::desc(alg, src, diff_wei, diff_dst, stride, pad, pad)
                               : dnnl::convolution_backward_weights::desc(alg, src, diff_wei, diff_bias, diff_dst, stride, pad, pad);
  return dnnl::convolution_backward_weights::primitive_desc(d, eng, hint);
#endif
}

inline dnnl::convolution_backward_data::primitive_desc conv_backward_data(const dnnl::engine& eng, const md& diff_src, const md& wei,
                                                                          const md& diff_dst, const dims& stride, const dims& pad,
                                                                          const dnnl::convolution_forward::primitive_desc& hint) {
  const auto alg = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::convolution_backward_data::primitive_desc(eng, alg, diff_src, wei, diff_dst, stride, pad, pad, hint);
#else
  return dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(alg, diff_src, wei, diff_dst, stride, pad, pad), eng, hint);
#endif
}

// ---- matmul ---------------------------------------------------------------------------------
// bias: a zero desc (md{}) for none.
inline dnnl::matmul::primitive_desc matmul(const dnnl::engine& eng, const md& src, const md& wei, const md& bias, const md& dst,
                                           const dnnl::primitive_attr& attr = {}) {
#if DNNL_VERSION_MAJOR >= 3
  return bias.is_zero() ? dnnl::matmul::primitive_desc(eng, src, wei, dst, attr)
                        : dnnl::matmul::primitive_desc(eng, src, wei, bias, dst, attr);
#else
  return dnnl::matmul::primitive_desc(bias.is_zero() ? dnnl::matmul::desc(src, wei, dst) : dnnl::matmul::desc(src, wei, bias, dst),
                                      attr, eng);
#endif
}
inline dnnl::matmul::primitive_desc matmul(const dnnl::engine& eng, const md& src, const md& wei, const md& dst) {
  return matmul(eng, src, wei, md{}, dst);
}

// ---- pooling (no dilation, symmetric padding) -----------------------------------------------
inline dnnl::pooling_forward::primitive_desc pooling_forward(const dnnl::engine& eng, dnnl::algorithm alg, const md& src, const md& dst,
                                                             const dims& stride, const dims& kernel, const dims& pad) {
  const auto prop = dnnl::prop_kind::forward_training;
#if DNNL_VERSION_MAJOR >= 3
  const dims dilation(stride.size(), 0);
  return dnnl::pooling_forward::primitive_desc(eng, prop, alg, src, dst, stride, kernel, dilation, pad, pad);
#else
  return dnnl::pooling_forward::primitive_desc(dnnl::pooling_forward::desc(prop, alg, src, dst, stride, kernel, pad, pad), eng);
#endif
}
inline dnnl::pooling_backward::primitive_desc pooling_backward(const dnnl::engine& eng, dnnl::algorithm alg, const md& diff_src,
                                                               const md& diff_dst, const dims& stride, const dims& kernel,
                                                               const dims& pad, const dnnl::pooling_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  const dims dilation(stride.size(), 0);
  return dnnl::pooling_backward::primitive_desc(eng, alg, diff_src, diff_dst, stride, kernel, dilation, pad, pad, hint);
#else
  return dnnl::pooling_backward::primitive_desc(dnnl::pooling_backward::desc(alg, diff_src, diff_dst, stride, kernel, pad, pad), eng,
                                                hint);
#endif
}

// ---- normalisation (forward_training; backward computes data and scale/shift gradients) -----
// One data desc: dst and diff tensors have src's layout, as everywhere in dlperf.
inline dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const dnnl::engine& eng, const md& data, float eps,
                                                                            dnnl::normalization_flags flags) {
  const auto prop = dnnl::prop_kind::forward_training;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::batch_normalization_forward::primitive_desc(eng, prop, data, data, eps, flags);
#else
  return dnnl::batch_normalization_forward::primitive_desc(dnnl::batch_normalization_forward::desc(prop, data, eps, flags), eng);
#endif
}
inline dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const dnnl::engine& eng, const md& data, float eps, dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint) {
  const auto prop = dnnl::prop_kind::backward;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::batch_normalization_backward::primitive_desc(eng, prop, data, data, data, eps, flags, hint);
#else
  return dnnl::batch_normalization_backward::primitive_desc(dnnl::batch_normalization_backward::desc(prop, data, data, eps, flags),
                                                            eng, hint);
#endif
}
inline dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const dnnl::engine& eng, const md& data, float eps,
                                                                            dnnl::normalization_flags flags) {
  const auto prop = dnnl::prop_kind::forward_training;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::layer_normalization_forward::primitive_desc(eng, prop, data, data, eps, flags);
#else
  return dnnl::layer_normalization_forward::primitive_desc(dnnl::layer_normalization_forward::desc(prop, data, eps, flags), eng);
#endif
}
inline dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const dnnl::engine& eng, const md& data, float eps, dnnl::normalization_flags flags,
    const dnnl::layer_normalization_forward::primitive_desc& hint) {
  const auto prop = dnnl::prop_kind::backward;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::layer_normalization_backward::primitive_desc(eng, prop, data, data, data, eps, flags, hint);
#else
  return dnnl::layer_normalization_backward::primitive_desc(dnnl::layer_normalization_backward::desc(prop, data, data, eps, flags),
                                                            eng, hint);
#endif
}

// ---- eltwise and binary ---------------------------------------------------------------------
// data: the activation's desc (dst has the same); for *_use_dst_for_bwd algorithms backward
// reads the forward's dst, whose desc is the same.
inline dnnl::eltwise_forward::primitive_desc eltwise_forward(const dnnl::engine& eng, dnnl::algorithm alg, const md& data,
                                                             float alpha = 0.0f, float beta = 0.0f) {
  const auto prop = dnnl::prop_kind::forward_training;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::eltwise_forward::primitive_desc(eng, prop, alg, data, data, alpha, beta);
#else
  return dnnl::eltwise_forward::primitive_desc(dnnl::eltwise_forward::desc(prop, alg, data, alpha, beta), eng);
#endif
}
inline dnnl::eltwise_backward::primitive_desc eltwise_backward(const dnnl::engine& eng, dnnl::algorithm alg, const md& data,
                                                               const dnnl::eltwise_forward::primitive_desc& hint, float alpha = 0.0f,
                                                               float beta = 0.0f) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::eltwise_backward::primitive_desc(eng, alg, data, data, data, alpha, beta, hint);
#else
  return dnnl::eltwise_backward::primitive_desc(dnnl::eltwise_backward::desc(alg, data, data, alpha, beta), eng, hint);
#endif
}
// The backward of an eltwise planned on its own: its forward hint is planned here.
inline dnnl::eltwise_backward::primitive_desc eltwise_backward(const dnnl::engine& eng, dnnl::algorithm alg, const md& data,
                                                               float alpha = 0.0f, float beta = 0.0f) {
  return eltwise_backward(eng, alg, data, eltwise_forward(eng, alg, data, alpha, beta), alpha, beta);
}

inline dnnl::binary::primitive_desc binary(const dnnl::engine& eng, dnnl::algorithm alg, const md& src0, const md& src1, const md& dst,
                                           const dnnl::primitive_attr& attr = {}) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::binary::primitive_desc(eng, alg, src0, src1, dst, attr);
#else
  return dnnl::binary::primitive_desc(dnnl::binary::desc(alg, src0, src1, dst), attr, eng);
#endif
}

}  // namespace dlperf::onednn::compat
