// oneDNN tensors, reorders and parameter storage (see context.h).
#include "backend/onednn/context.h"

#include <algorithm>
#include <cstring>

namespace dlperf::onednn {

dt to_dnnl(DType t) {
  switch (t) {
    case DType::f32: return dt::f32;
    case DType::bf16: return dt::bf16;
    case DType::f16: return dt::f16;
    case DType::s32: return dt::s32;
  }
  return dt::undef;
}

tag plain_tag(size_t rank) {
  switch (rank) {
    case 1: return tag::a;
    case 2: return tag::ab;
    case 3: return tag::abc;
    case 4: return tag::abcd;
    case 5: return tag::abcde;
    default: DLPERF_ASSERT(false, "tensors have 1 to 5 dims");
  }
  return tag::undef;
}

md plain_md(const Dims& dims, DType dtype) { return md(dims, to_dnnl(dtype), plain_tag(dims.size())); }
md any_md(const Dims& dims, DType dtype) { return md(dims, to_dnnl(dtype), tag::any); }

// ---- CpuTensor -------------------------------------------------------------------------------

void MemoryBudget::charge(int64_t bytes) {
  if (limit > 0 && used + bytes > limit)
    throw OutOfMemoryError("out of memory: " + std::to_string(bytes) + " bytes more would exceed --memory-limit-mb " +
                           std::to_string(limit >> 20) + " (" + std::to_string(used) + " bytes in use); use a smaller --batch-size "
                           "(--find-max-batch finds the largest)");
  used += bytes;
  peak = std::max(peak, used);
}

CpuTensor::CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc)
    : Tensor(std::move(dims), dtype),
      ctx_(std::move(ctx)),
      charge_(ctx_->budget, static_cast<int64_t>(desc.get_size())),
      mem_(desc, ctx_->engine) {
  zero();  // padded elements of blocked layouts must start (and stay) zero
}

CpuTensor::CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc, void* handle)
    : Tensor(std::move(dims), dtype), ctx_(std::move(ctx)), mem_(desc, ctx_->engine, handle) {}

void CpuTensor::read(std::span<float> out) const {
  DLPERF_ASSERT(static_cast<int64_t>(out.size()) == numel(), "read size " + std::to_string(out.size()) + " != " + to_string(dims()));
  dnnl::memory user(plain_md(dims(), DType::f32), ctx_->engine, out.data());
  reorder(*ctx_, mem_, user);
}

void CpuTensor::write(std::span<const float> in) {
  DLPERF_ASSERT(static_cast<int64_t>(in.size()) == numel(), "write size " + std::to_string(in.size()) + " != " + to_string(dims()));
  dnnl::memory user(plain_md(dims(), DType::f32), ctx_->engine, const_cast<float*>(in.data()));
  reorder(*ctx_, user, mem_);
}

void CpuTensor::write_indices(std::span<const int32_t> in) {
  DLPERF_ASSERT(dtype() == DType::s32 && static_cast<int64_t>(in.size()) == numel(), "index tensor of matching size");
  std::memcpy(mem_.get_data_handle(), in.data(), in.size_bytes());
}

bool CpuTensor::same_layout(const Tensor& other) const {
  return dims() == other.dims() && dtype() == other.dtype() && desc() == cpu(other).desc();
}

void CpuTensor::zero() { std::memset(mem_.get_data_handle(), 0, mem_.get_desc().get_size()); }

const CpuTensor& cpu(const Tensor& t) { return static_cast<const CpuTensor&>(t); }
CpuTensor& cpu(Tensor& t) { return static_cast<CpuTensor&>(t); }

// ---- reorders ----------------------------------------------------------------------------------

void reorder(Context& ctx, const dnnl::memory& src, const dnnl::memory& dst) {
  dnnl::reorder(src, dst).execute(ctx.stream, const_cast<dnnl::memory&>(src), const_cast<dnnl::memory&>(dst));
  ctx.stream.wait();
}

PlannedReorder::PlannedReorder(Context& ctx, const md& src, const md& dst) : needed_(src != dst) {
  if (needed_) prim_ = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, src, ctx.engine, dst));
}

void PlannedReorder::run(Context& ctx, const dnnl::memory& src, const dnnl::memory& dst) const {
  if (!needed_) {
    if (src.get_data_handle() != dst.get_data_handle())
      std::memcpy(dst.get_data_handle(), src.get_data_handle(), src.get_desc().get_size());
    return;
  }
  prim_.execute(ctx.stream, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

// ---- Param -------------------------------------------------------------------------------------

Param::Param(std::shared_ptr<Context> ctx, const md& master, const Dims& canonical)
    : ctx_(std::move(ctx)), master_(master), canonical_(plain_md(canonical, DType::f32)) {
  DLPERF_ASSERT(master.data_type() == dt::f32, "master parameters are f32");
}

size_t Param::add_view(const md& layout) {
  View v;
  v.shared = layout == master_;
  if (!v.shared) {
    v.charge = Charge(ctx_->budget, static_cast<int64_t>(layout.get_size()));
    v.mem = dnnl::memory(layout, ctx_->engine);
    v.from_master = PlannedReorder(*ctx_, master_, layout);
  }
  views_.push_back(std::move(v));
  return views_.size() - 1;
}

void Param::bind(const ParamSlot& slot) {
  value_ = dnnl::memory(master_, ctx_->engine, slot.value);
  grad_ = dnnl::memory(master_, ctx_->engine, slot.grad);
}

void Param::refresh() {
  for (auto& v : views_)
    if (!v.shared) v.from_master.run(*ctx_, value_, v.mem);
}

void Param::write(std::span<const float> canonical) {
  DLPERF_ASSERT(canonical.size() * sizeof(float) == canonical_.get_size(), "parameter size");
  dnnl::memory user(canonical_, ctx_->engine, const_cast<float*>(canonical.data()));
  reorder(*ctx_, user, value_);
  refresh();
  ctx_->stream.wait();
}

void Param::read_value(std::span<float> canonical) const {
  DLPERF_ASSERT(canonical.size() * sizeof(float) == canonical_.get_size(), "parameter size");
  dnnl::memory user(canonical_, ctx_->engine, canonical.data());
  reorder(*ctx_, value_, user);
}

void Param::read_grad(std::span<float> canonical) const {
  DLPERF_ASSERT(canonical.size() * sizeof(float) == canonical_.get_size(), "parameter size");
  dnnl::memory user(canonical_, ctx_->engine, canonical.data());
  reorder(*ctx_, grad_, user);
}

}  // namespace dlperf::onednn
