// CudaTensor: device storage in the canonical or channels-last layout; read/write move data
// in the canonical dense f32 layout (a host copy plus, when needed, the convert kernel).
// read / write synchronise (tests, fixtures); write_bytes / write_indices from host memory, the
// per-step input batch of the direct input stage, do not (HostUpload, host_upload.h).
#include "backend/cuda/context.h"
#include "backend/cuda/host_upload.h"

namespace dlperf::cuda {

namespace {
int64_t row_pitch(const Dims& d, int64_t pitch) {
  if (d.size() != 2) return pitch == 0 ? 0 : -1;
  return pitch == 0 ? d[1] : pitch;
}
}  // namespace

CudaTensor::CudaTensor(Ctx ctx, Dims dims, DType dtype, Layout layout, int64_t pitch)
    : Tensor(std::move(dims), dtype),
      ctx_(std::move(ctx)),
      layout_(this->dims().size() == 4 ? layout : Layout::canonical),
      pitch_(row_pitch(this->dims(), pitch)),
      mem_(ctx_->alloc(static_cast<size_t>(this->dims().size() == 2 ? this->dims()[0] * pitch_ : numel()) * dtype_size(dtype))) {
  DLPERF_ASSERT(pitch_ >= 0 && (this->dims().size() != 2 || pitch_ >= this->dims()[1]), "a row pitch only on 2-D tensors, at least the columns");
  zero();
}

CudaTensor::CudaTensor(Ctx ctx, Dims dims, DType dtype, void* borrowed)
    : Tensor(std::move(dims), dtype), ctx_(std::move(ctx)), layout_(Layout::canonical), pitch_(row_pitch(this->dims(), 0)), borrowed_(borrowed) {}

CudaTensor::~CudaTensor() = default;

void CudaTensor::upload(const void* src, size_t bytes) {
  if (!upload_ || upload_->bytes() != bytes) upload_ = std::make_unique<HostUpload>(*ctx_, bytes);
  upload_->to_device(*ctx_, data(), src);
}

void CudaTensor::read(std::span<float> out) const {
  DLPERF_ASSERT(static_cast<int64_t>(out.size()) == numel(), "read size " + std::to_string(out.size()) + " != " + to_string(dims()));
  if (padded()) {  // through a dense copy of the columns
    CudaTensor dense(ctx_, dims(), dtype(), Layout::canonical);
    const size_t e = dtype_size(dtype());
    DLPERF_CHECK(cudaMemcpy2DAsync(dense.data(), static_cast<size_t>(dims()[1]) * e, data(), static_cast<size_t>(pitch_) * e,
                                   static_cast<size_t>(dims()[1]) * e, static_cast<size_t>(dims()[0]), cudaMemcpyDeviceToDevice, ctx_->s()));
    dense.read(out);
    return;
  }
  if (dtype() == DType::f32 && !nhwc()) {
    DLPERF_CHECK(cudaMemcpyAsync(out.data(), data(), out.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
  } else {
    DeviceMemory tmp = ctx_->alloc(out.size_bytes());
    convert(*ctx_, data(), dtype(), nhwc(), tmp.get(), DType::f32, false, dims());
    DLPERF_CHECK(cudaMemcpyAsync(out.data(), tmp.get(), out.size_bytes(), cudaMemcpyDeviceToHost, ctx_->s()));
    ctx_->sync();  // before tmp is freed
  }
  ctx_->sync();
}

void CudaTensor::write(std::span<const float> in) {
  DLPERF_ASSERT(static_cast<int64_t>(in.size()) == numel(), "write size " + std::to_string(in.size()) + " != " + to_string(dims()));
  if (padded()) {
    CudaTensor dense(ctx_, dims(), dtype(), Layout::canonical);
    dense.write(in);
    const size_t e = dtype_size(dtype());
    DLPERF_CHECK(cudaMemcpy2DAsync(data(), static_cast<size_t>(pitch_) * e, dense.data(), static_cast<size_t>(dims()[1]) * e,
                                   static_cast<size_t>(dims()[1]) * e, static_cast<size_t>(dims()[0]), cudaMemcpyDeviceToDevice, ctx_->s()));
    ctx_->sync();  // before dense is freed
    return;
  }
  if (dtype() == DType::f32 && !nhwc()) {
    DLPERF_CHECK(cudaMemcpyAsync(data(), in.data(), in.size_bytes(), cudaMemcpyHostToDevice, ctx_->s()));
  } else {
    DeviceMemory tmp = ctx_->alloc(in.size_bytes());
    DLPERF_CHECK(cudaMemcpyAsync(tmp.get(), in.data(), in.size_bytes(), cudaMemcpyHostToDevice, ctx_->s()));
    convert(*ctx_, tmp.get(), DType::f32, false, data(), dtype(), nhwc(), dims());
    ctx_->sync();  // before tmp is freed
  }
  ctx_->sync();  // the caller may free `in` on return
}

void CudaTensor::write_indices(std::span<const int32_t> in) {
  DLPERF_ASSERT(dtype() == DType::s32 && static_cast<int64_t>(in.size()) == numel(), "index tensor of matching size");
  upload(in.data(), in.size_bytes());  // in is free on return; no host sync
}

void CudaTensor::write_bytes(const void* src, size_t bytes) {
  DLPERF_ASSERT(bytes == storage_bytes(), "write_bytes of " + std::to_string(bytes) + " bytes into " + to_string(dims()));
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, src) != cudaSuccess) (void)cudaGetLastError();
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {  // a device source (GPU decode): as before
    DLPERF_CHECK(cudaMemcpyAsync(data(), src, bytes, cudaMemcpyDefault, ctx_->s()));
    ctx_->sync();  // the caller may reuse `src` on return
    return;
  }
  upload(src, bytes);  // host memory, pageable or pinned: src is free on return, no host sync
}

void CudaTensor::zero() { DLPERF_CHECK(cudaMemsetAsync(data(), 0, storage_bytes(), ctx_->s())); }

const CudaTensor& dev(const Tensor& t) { return static_cast<const CudaTensor&>(t); }
CudaTensor& dev(Tensor& t) { return static_cast<CudaTensor&>(t); }

}  // namespace dlperf::cuda
