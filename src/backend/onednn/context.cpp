// oneDNN tensors, reorders and parameter storage (see context.h).
#include "backend/onednn/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

namespace dlperf::onednn {

DType from_dnnl(dt t) {
  switch (t) {
    case dt::bf16: return DType::bf16;
    case dt::f16: return DType::f16;
    case dt::s32: return DType::s32;
    default: return DType::f32;
  }
}

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

std::string shape_of(const Dims& dims, DType dtype) { return to_string(dims) + " " + to_string(dtype); }

bool is_reference_impl(const std::string& impl) {
  return impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos || impl.find("_ref") != std::string::npos;
}

void record_kernel(Context& ctx, std::string op, std::string pass, std::string shape, const dnnl::primitive_desc_base& pd) {
  std::string impl = pd.impl_info_str();
  const bool reference = is_reference_impl(impl);
  ctx.kernels.push_back({std::move(op), std::move(pass), std::move(shape), std::move(impl), reference});
}

void record_own_kernel(Context& ctx, std::string op, std::string pass, std::string shape) {
  ctx.kernels.push_back({std::move(op), std::move(pass), std::move(shape), kOwnKernel, false});
}

// ---- CpuTensor -------------------------------------------------------------------------------

void MemoryBudget::charge(int64_t bytes) {
  if (limit > 0 && used + bytes > limit)
    throw OutOfMemoryError("out of memory: " + std::to_string(bytes) + " bytes more would exceed --memory-limit-mb " +
                           std::to_string(limit >> 20) + " (" + std::to_string(used) + " bytes in use); use a smaller --batch-size "
                           "(--find-max-batch finds the largest)");
  used += bytes;
  peak = std::max(peak, used);
}

HostMemory::HostMemory(size_t bytes) : bytes_(std::max<size_t>(bytes, 1)) {
  constexpr size_t kMapThreshold = size_t{1} << 20;
  if (bytes_ >= kMapThreshold) {
    // MAP_NORESERVE: no swap is reserved up front, so a plan larger than this machine
    // (dlperf-train --model llama3_8b --plan-only: 32 GB of parameters on a 24 GB host) maps
    // without being touched. Runs that would not fit are refused before they allocate
    // (train/memory/size_limits.h), as before.
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      data_ = p;
      mapped_ = true;
      return;
    }
  }
  data_ = std::aligned_alloc(64, (bytes_ + 63) / 64 * 64);
  if (!data_) throw OutOfMemoryError("out of memory allocating " + std::to_string(bytes_) + " bytes");
  std::memset(data_, 0, bytes_);
}

HostMemory::~HostMemory() {
  if (!data_) return;
  if (mapped_) ::munmap(data_, bytes_);
  else std::free(data_);
}

// Padded elements of blocked layouts must start (and stay) zero: HostMemory starts zeroed.
CpuTensor::CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc)
    : Tensor(std::move(dims), dtype),
      ctx_(std::move(ctx)),
      charge_(ctx_->budget, static_cast<int64_t>(desc.get_size())),
      storage_(desc.get_size()),
      mem_(desc, ctx_->engine, storage_.data()) {}

CpuTensor::CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc, void* handle)
    : Tensor(std::move(dims), dtype), ctx_(std::move(ctx)), mem_(desc, ctx_->engine, handle) {}

void CpuTensor::read(std::span<float> out) const {
  DLPERF_ASSERT(static_cast<int64_t>(out.size()) == numel(), "read size " + std::to_string(out.size()) + " != " + to_string(dims()));
  const md user_md = plain_md(dims(), DType::f32);
  if (desc() == user_md) return (void)std::memcpy(out.data(), data(), out.size_bytes());
  dnnl::memory user(user_md, ctx_->engine, out.data());
  reorder(*ctx_, mem_, user);
}

void CpuTensor::write(std::span<const float> in) {
  DLPERF_ASSERT(static_cast<int64_t>(in.size()) == numel(), "write size " + std::to_string(in.size()) + " != " + to_string(dims()));
  const md user_md = plain_md(dims(), DType::f32);
  if (desc() == user_md) return (void)std::memcpy(data(), in.data(), in.size_bytes());
  dnnl::memory user(user_md, ctx_->engine, const_cast<float*>(in.data()));
  reorder(*ctx_, user, mem_);
}

void CpuTensor::write_indices(std::span<const int32_t> in) {
  DLPERF_ASSERT(dtype() == DType::s32 && static_cast<int64_t>(in.size()) == numel(), "index tensor of matching size");
  std::memcpy(mem_.get_data_handle(), in.data(), in.size_bytes());
}

void CpuTensor::write_bytes(const void* src, size_t bytes) {
  const md& d = mem_.get_desc();
  DLPERF_ASSERT(bytes == d.get_size(), "write_bytes of " + std::to_string(bytes) + " bytes into " + to_string(dims()));
  DLPERF_ASSERT(d == plain_md(dims(), dtype()) || (dims().size() == 4 && d == md(dims(), to_dnnl(dtype()), tag::nhwc)),
                "write_bytes needs a dense canonical or channels-last tensor");
  std::memcpy(mem_.get_data_handle(), src, bytes);
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

PlannedReorder::PlannedReorder(Context& ctx, const md& src, const md& dst, const std::string& op) : needed_(src != dst) {
  if (!needed_) return;
  const auto pd = dnnl::reorder::primitive_desc(ctx.engine, src, ctx.engine, dst);
  prim_ = dnnl::reorder(pd);
  const auto dims = compat::md_dims(src);
  record_kernel(ctx, op, "reorder", shape_of(Dims(dims.begin(), dims.end()), from_dnnl(compat::md_data_type(src))) + " -> " +
                                        to_string(from_dnnl(compat::md_data_type(dst))), pd);
}

void PlannedReorder::run(Context& ctx, const dnnl::memory& src, const dnnl::memory& dst) const {
  if (!needed_) {
    if (src.get_data_handle() != dst.get_data_handle())
      std::memcpy(dst.get_data_handle(), src.get_data_handle(), src.get_desc().get_size());
    return;
  }
  prim_.execute(ctx.stream, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

ChargedMemory::ChargedMemory(Context& ctx, const dnnl::memory::desc& layout)
    : dnnl::memory(layout, ctx.engine), charge_(ctx.budget, static_cast<int64_t>(layout.get_size())) {}

// ---- Param -------------------------------------------------------------------------------------

Param::Param(std::shared_ptr<Context> ctx, std::string name, const md& master, const Dims& canonical)
    : ctx_(std::move(ctx)), name_(std::move(name)), master_(master), canonical_(plain_md(canonical, DType::f32)) {
  DLPERF_ASSERT(compat::md_data_type(master) == dt::f32, "master parameters are f32");
}

size_t Param::add_view(const md& layout) {
  View v;
  v.shared = layout == master_;
  if (!v.shared) {
    v.charge = Charge(ctx_->budget, static_cast<int64_t>(layout.get_size()));
    v.mem = dnnl::memory(layout, ctx_->engine);
    v.from_master = PlannedReorder(*ctx_, master_, layout, name_);
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
