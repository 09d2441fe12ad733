// Context, parameters and the GEMM helpers of the CUDA backend (see context.h).
#include "backend/cuda/context.h"

#include <climits>
#include <iostream>

namespace dlperf::cuda {

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::s32: return CUDNN_DATA_INT32;
  }
  return CUDNN_DATA_FLOAT;
}

cudaDataType_t cublas_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::s32: return CUDA_R_32I;
  }
  return CUDA_R_32F;
}

void SharedArea::reserve(size_t bytes) {
  // Growing frees the old block: cudaFree waits for the device, so no queued op still uses it.
  if (bytes > mem_.bytes()) mem_ = DeviceMemory(bytes, counter_);
}

namespace {
// Runs before every other member of Context is built: the stream and handles belong to the device.
int select_device(int ordinal) {
  DLPERF_CHECK(cudaSetDevice(ordinal));
  return ordinal;
}
}  // namespace

Context::Context(int device_ordinal, Precision p, bool autotune, bool det)
    : device(select_device(device_ordinal)), precision(p), conv_autotune(autotune), deterministic(det) {
  DLPERF_CHECK(cudaGetDeviceProperties(&props, device));
  DLPERF_CHECK(cudnnSetStream(cudnn, stream.get()));
  DLPERF_CHECK(cublasSetStream(cublas, stream.get()));
  ones_.resize(4);
  ones_count_.assign(4, 0);
}

Context::~Context() {
  // Queued kernels may still read memory the members below free.
  cudaStreamSynchronize(stream.get());
}

const void* Context::ones(DType t, int64_t count) {
  const auto i = static_cast<size_t>(t);
  if (count > ones_count_[i]) {
    ones_[i] = alloc(static_cast<size_t>(count) * dtype_size(t));
    DLPERF_CHECK(launch_fill(ones_[i].get(), elem(t), count, 1.0f, s()));
    ones_count_[i] = count;
  }
  return ones_[i].get();
}

cudnnMathType_t Context::conv_math(DType data) const {
  if (data != DType::f32) return CUDNN_TENSOR_OP_MATH;  // without it cuDNN rules tensor cores out for f16/bf16
  return tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;  // DEFAULT permits TF32 on sm_80+; FMA never does
}

cublasComputeType_t Context::gemm_compute(DType in) const {
  if (in != DType::f32) return CUBLAS_COMPUTE_32F;  // f16/bf16 inputs: tensor cores, f32 accumulation
  return tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
}

std::string Context::gemm_math_name(DType in) const {
  if (in != DType::f32) return "tensor cores, f32 accumulation";
  return tf32() ? "tf32 tensor cores" : "f32 pedantic";
}

void Context::record_kernel(std::string op, std::string pass, std::string shape, std::string impl, MathUnits units) {
  // fp32 asks for IEEE f32 (no tensor cores); every other precision is benchmarked for its
  // tensor-core kernels, so a convolution without them measures a fallback.
  const bool reference = precision != Precision::fp32 && units == MathUnits::cuda_cores;
  if (units == MathUnits::tensor_cores) impl += " [tensor cores]";
  if (units == MathUnits::cuda_cores) impl += " [no tensor cores]";
  kernels.push_back({std::move(op), std::move(pass), std::move(shape), std::move(impl), reference});
}

void Context::warn_fallback(std::string op, std::string pass, std::string shape, const std::string& fallback, const std::string& why,
                            MathUnits units, bool counted) {
  if (warned_.insert(pass + '\n' + fallback).second)  // later ones of the same kind: in the kernel record only
    std::cerr << "dlperf: warning: " << op << " " << pass << " " << shape << ": " << why << "; using " << fallback << " instead\n"
              << std::flush;
  record_kernel(std::move(op), std::move(pass), std::move(shape), fallback + " (fallback)", units);
  if (counted && precision != Precision::fp32) kernels.back().reference = true;
}

std::string shape_str(const Dims& dims, DType t, bool nhwc) {
  return to_string(dims) + " " + to_string(t) + (nhwc && dims.size() == 4 ? " nhwc" : "");
}

Nchw nchw_of(const Dims& d) {
  if (d.size() == 4) return {d[0], d[1], d[2] * d[3]};
  return {1, 1, product(d)};
}

void convert(Context& ctx, const void* src, DType src_type, bool src_nhwc, void* dst, DType dst_type, bool dst_nhwc,
             const Dims& dims) {
  const Nchw s = nchw_of(dims);
  const bool four = dims.size() == 4;
  if (src_type == dst_type && (src_nhwc == dst_nhwc || !four)) {
    if (src != dst)
      DLPERF_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(product(dims)) * dtype_size(src_type), cudaMemcpyDeviceToDevice,
                                   ctx.s()));
    return;
  }
  DLPERF_CHECK(launch_convert(src, elem(src_type), four && src_nhwc, dst, elem(dst_type), four && dst_nhwc, s.n, s.c, s.hw, ctx.s()));
}

// ---- Param -------------------------------------------------------------------------------------

Param::Param(Ctx ctx, Dims canonical, DType compute, bool channels_last_filter, int64_t pad_rows_to)
    : ctx_(std::move(ctx)), dims_(std::move(canonical)), stored_(dims_), compute_(compute),
      krsc_(channels_last_filter && dims_.size() == 4) {
  DLPERF_ASSERT(pad_rows_to >= 1 && (pad_rows_to == 1 || (dims_.size() <= 2 && !krsc_)), "row padding of plain tables only");
  stored_[0] = (dims_[0] + pad_rows_to - 1) / pad_rows_to * pad_rows_to;
  if (compute_ != DType::f32 || krsc_) copy_ = ctx_->alloc(storage_elems() * dtype_size(compute_));
}

void Param::bind(const ParamSlot& slot) { slot_ = slot; }

void Param::refresh() {
  if (copy_.get()) convert(*ctx_, slot_.value, DType::f32, false, copy_.get(), compute_, krsc_, stored_);
}

bool Param::cast_segment(CastSegment& out) const {
  if (!copy_.get()) return false;
  const Nchw s = nchw_of(stored_);
  out = {slot_.value, copy_.get(), s.n, s.c, s.hw, elem(compute_), krsc_};
  return true;
}

void Param::write(std::span<const float> canonical) {
  DLPERF_ASSERT(canonical.size() == canonical_elems() && slot_.value, "parameter write of the canonical size");
  DLPERF_CHECK(cudaMemcpyAsync(slot_.value, canonical.data(), canonical.size_bytes(), cudaMemcpyHostToDevice, ctx_->s()));
  refresh();
  ctx_->sync();
}

void Param::read_value(std::span<float> canonical) const {
  DLPERF_ASSERT(canonical.size() == canonical_elems() && slot_.value, "parameter read of the canonical size");
  DLPERF_CHECK(cudaMemcpyAsync(canonical.data(), slot_.value, canonical.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
  ctx_->sync();
}

void Param::read_grad(std::span<float> canonical) const {
  DLPERF_ASSERT(canonical.size() == canonical_elems() && slot_.grad, "gradient read of the canonical size");
  DLPERF_CHECK(cudaMemcpyAsync(canonical.data(), slot_.grad, canonical.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
  ctx_->sync();
}

void set_4d(const TensorDesc& d, DType t, bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w) {
  DLPERF_CHECK(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(t), static_cast<int>(n),
                                          static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}

// ---- GEMM --------------------------------------------------------------------------------------

namespace {
int as_int(int64_t v, const char* what) {
  DLPERF_ASSERT(v >= 0 && v <= INT_MAX, std::string("GEMM ") + what + " fits cuBLAS's int");
  return static_cast<int>(v);
}
}  // namespace

void gemm(Context& ctx, const GemmShape& g, float alpha, const void* x, const void* y, DType in_type, float beta, void* z,
          DType out_type) {
  const GemmOperand xo{x, g.trans_x ? g.m : g.k, g.m * g.k};  // x stored (k, m) when transposed, else (m, k)
  const GemmOperand yo{y, g.trans_y ? g.k : g.n, g.k * g.n};  // y stored (n, k) when transposed, else (k, n)
  gemm_ex(ctx, g, alpha, xo, yo, in_type, beta, {z, g.n, g.m * g.n}, out_type);
}

void gemm_ex(Context& ctx, const GemmShape& g, float alpha, GemmOperand x, GemmOperand y, DType in_type, float beta, GemmOperand z,
             DType out_type) {
  // cuBLAS is column-major; a row-major (m, n) matrix with row pitch p is the column-major
  // (n, m) one with leading dimension p, so z^T = op(y)^T op(x)^T is computed with y as
  // cuBLAS's A and x as its B.
  const int m = as_int(g.n, "n"), n = as_int(g.m, "m"), k = as_int(g.k, "k");
  const cublasOperation_t ta = g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
  // f32 accumulation in every precision; TF32 only under --precision tf32 (Context::gemm_compute).
  DLPERF_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, ta, tb, m, n, k, &alpha, y.p, cublas_type(in_type), as_int(y.pitch, "pitch"),
                                          y.stride, x.p, cublas_type(in_type), as_int(x.pitch, "pitch"), x.stride, &beta,
                                          const_cast<void*>(z.p), cublas_type(out_type), as_int(z.pitch, "pitch"), z.stride,
                                          as_int(g.batch, "batch"), ctx.gemm_compute(in_type), CUBLAS_GEMM_DEFAULT));
}

void gemm_batched(Context& ctx, const GemmShape& g, float alpha, const GemmPointers& p, DType in_type, float beta, DType out_type) {
  // Row-major to cuBLAS's column-major as in gemm_ex: y is cuBLAS's A, x its B.
  const int m = as_int(g.n, "n"), n = as_int(g.m, "m"), k = as_int(g.k, "k");
  const cublasOperation_t ta = g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
  DLPERF_CHECK(cublasGemmBatchedEx(ctx.cublas, ta, tb, m, n, k, &alpha, p.y, cublas_type(in_type), as_int(p.y_pitch, "pitch"), p.x,
                                   cublas_type(in_type), as_int(p.x_pitch, "pitch"), &beta, p.z, cublas_type(out_type),
                                   as_int(p.z_pitch, "pitch"), as_int(g.batch, "batch"), ctx.gemm_compute(in_type), CUBLAS_GEMM_DEFAULT));
}

void column_sums(Context& ctx, const void* x, DType t, int64_t rows, int64_t cols, float* out) {
  // out (1, cols) = ones (1, rows) x (rows, cols)
  gemm(ctx, {false, false, 1, cols, rows, 1}, 1.0f, ctx.ones(t, rows), x, t, 0.0f, out, DType::f32);
}

void row_sums(Context& ctx, const void* x, DType t, int64_t rows, int64_t cols, float* out) {
  // out (rows, 1) = x (rows, cols) ones (cols, 1)
  gemm(ctx, {false, false, rows, 1, cols, 1}, 1.0f, x, ctx.ones(t, cols), t, 0.0f, out, DType::f32);
}

}  // namespace dlperf::cuda
