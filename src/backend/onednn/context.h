// The oneDNN backend's shared pieces: the engine/stream context, the tensor (a dnnl::memory
// with its logical dims), helpers to build descriptors, and a planned reorder.
#pragma once

#include <dnnl.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/onednn/dnnl_compat.h"
#include "core/error.h"

namespace dlperf::onednn {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using md = dnnl::memory::desc;

// --memory-limit-mb (BackendOptions::memory_limit_bytes): a CPU has no fixed device memory,
// so --find-max-batch needs a budget to fill. The backend charges every tensor, parameter view
// and flat buffer it allocates (activations, their gradients, inputs, parameters, gradients,
// optimizer state: what grows with the batch and the model) before allocating it, and throws
// OutOfMemoryError when the budget would be exceeded, exactly as cudaMalloc fails on a full
// GPU. oneDNN's own primitive workspaces and scratchpads are not charged. A budget rather
// than an address-space limit (RLIMIT_AS) because oneDNN 2.x does not survive every failed
// allocation inside primitive creation.
struct MemoryBudget {
  int64_t limit = 0;  // bytes; 0: unlimited
  int64_t used = 0;
  int64_t peak = 0;
  void charge(int64_t bytes);  // throws OutOfMemoryError past the limit
  void refund(int64_t bytes) { used -= bytes; }
};

// What one allocation charged, refunded when it is freed (move-only).
class Charge {
 public:
  Charge() = default;
  Charge(MemoryBudget& b, int64_t bytes) : budget_(&b), bytes_(bytes) { b.charge(bytes); }
  ~Charge() {
    if (budget_) budget_->refund(bytes_);
  }
  Charge(Charge&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)), bytes_(o.bytes_) {}
  Charge& operator=(Charge&& o) noexcept {
    std::swap(budget_, o.budget_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;

 private:
  MemoryBudget* budget_ = nullptr;
  int64_t bytes_ = 0;
};

struct Context;

// A oneDNN memory an op allocates for itself (batch statistics, workspaces, masks, staging),
// charged to the budget as a tensor is, refunded when it goes: the allocation counter (and the
// memory plan checked against it) sees it too.
class ChargedMemory : public dnnl::memory {
 public:
  ChargedMemory() = default;
  ChargedMemory(Context& ctx, const dnnl::memory::desc& layout);

 private:
  Charge charge_;
};

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  MemoryBudget budget;
  std::vector<PlannedKernel> kernels;  // every primitive planned on this engine, in plan order
};

// The problem of a kernel as the record shows it: "(32, 64, 56, 56) bf16".
std::string shape_of(const Dims& dims, DType dtype);
// oneDNN's reference implementations ("ref:any", "ref_fused_convolution:any", "gemm:ref"): plain
// C++ loops, kept by oneDNN for correctness where no optimised kernel applies.
bool is_reference_impl(const std::string& impl);
// Appends what oneDNN chose for a primitive planned for `op` to ctx.kernels.
void record_kernel(Context& ctx, std::string op, std::string pass, std::string shape, const dnnl::primitive_desc_base& pd);
// The same for dlperf's own vectorised OpenMP kernels (dropout, embedding, masked softmax, ...).
inline constexpr const char* kOwnKernel = "dlperf:openmp";
void record_own_kernel(Context& ctx, std::string op, std::string pass, std::string shape);

dt to_dnnl(DType t);
DType from_dnnl(dt t);  // f32 for types dlperf does not use
tag plain_tag(size_t rank);                   // a, ab, abc, abcd, abcde
md plain_md(const Dims& dims, DType dtype);   // canonical dense layout
md any_md(const Dims& dims, DType dtype);     // format_tag::any: let the primitive choose

// Zero-filled host memory, 64-byte aligned. Large blocks come straight from mmap: the kernel
// hands out zero pages on first touch, so nothing is written twice and memory a plan never
// touches (dlperf-train --plan-only) costs nothing. Small blocks: aligned_alloc + memset.
class HostMemory {
 public:
  HostMemory() = default;
  explicit HostMemory(size_t bytes);
  ~HostMemory();
  HostMemory(HostMemory&& o) noexcept : data_(o.data_), bytes_(o.bytes_), mapped_(o.mapped_) { o.data_ = nullptr; }
  HostMemory& operator=(HostMemory&&) = delete;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  void* data() const { return data_; }
  bool mapped() const { return mapped_; }  // from mmap: whole pages of it may be given back (madvise)

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;
};

class CpuTensor final : public Tensor {
 public:
  CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc);
  // A tensor over storage it does not own (a parameter slice of the flat buffers).
  CpuTensor(std::shared_ptr<Context> ctx, Dims dims, DType dtype, const md& desc, void* handle);

  size_t storage_bytes() const override { return mem_.get_desc().get_size(); }
  void read(std::span<float> out) const override;
  void write(std::span<const float> in) override;
  void write_indices(std::span<const int32_t> in) override;
  void write_bytes(const void* src, size_t bytes) override;
  void zero() override;
  bool same_layout(const Tensor& other) const override;

  const dnnl::memory& mem() const { return mem_; }
  dnnl::memory& mem() { return mem_; }
  md desc() const { return mem_.get_desc(); }
  void* data() const { return mem_.get_data_handle(); }

 private:
  std::shared_ptr<Context> ctx_;
  Charge charge_;        // before storage_: charged before the allocation, refunded after the free
  HostMemory storage_;  // empty for a tensor over storage it does not own
  dnnl::memory mem_;
};

// Downcasts an interface tensor; the backend only ever hands out CpuTensors.
const CpuTensor& cpu(const Tensor& t);
CpuTensor& cpu(Tensor& t);

// Copies between any two layouts/dtypes of the same dims with a oneDNN reorder.
void reorder(Context& ctx, const dnnl::memory& src, const dnnl::memory& dst);

// A reorder planned once: src and dst descriptors fixed, run many times.
class PlannedReorder {
 public:
  PlannedReorder() = default;
  // op: what the reorder serves, for the kernel record ("layer1.0.conv1.weight", "cross_entropy").
  PlannedReorder(Context& ctx, const md& src, const md& dst, const std::string& op);
  bool needed() const { return needed_; }
  void run(Context& ctx, const dnnl::memory& src, const dnnl::memory& dst) const;

 private:
  bool needed_ = false;
  dnnl::reorder prim_;
};

// One parameter of a oneDNN op. The f32 master values and gradients live in the trainer's
// flat buffers in `master` layout (the layout the backward-weights primitive writes). Each
// primitive that reads the weights may want its own dtype and layout (forward: OIhw16i16o,
// backward data: OIhw16o16i, bf16: a VNNI-blocked one): each is a *view*. A view equal to
// the master layout reads the master values directly; any other is reordered from the
// master values by refresh(), once per step.
class Param {
 public:
  Param() = default;
  Param(std::shared_ptr<Context> ctx, std::string name, const md& master, const Dims& canonical);
  size_t storage_elems() const { return master_.get_size() / sizeof(float); }
  size_t add_view(const md& layout);  // returns the view's index
  void bind(const ParamSlot& slot);
  void refresh();
  void write(std::span<const float> canonical);
  void read_value(std::span<float> canonical) const;
  void read_grad(std::span<float> canonical) const;

  const dnnl::memory& value() const { return value_; }  // master f32
  const dnnl::memory& view(size_t i) const { return views_[i].shared ? value_ : views_[i].mem; }
  const dnnl::memory& grad() const { return grad_; }

 private:
  struct View {
    bool shared = true;
    Charge charge;
    dnnl::memory mem;
    PlannedReorder from_master;
  };
  std::shared_ptr<Context> ctx_;
  std::string name_;  // "layer1.0.conv1.weight"
  md master_, canonical_;
  dnnl::memory value_, grad_;
  std::vector<View> views_;
};

// The Layer plumbing shared by every oneDNN op with parameters (Conv2d, BatchNorm, Linear,
// LayerNorm, Embedding): Interface is the op's abstract class.
template <class Interface>
class WithParams : public Interface {
 public:
  void bind(std::span<const ParamSlot> slots) override {
    DLPERF_ASSERT(slots.size() == params_.size(), "one slot per parameter");
    for (size_t i = 0; i < slots.size(); ++i) params_[i].bind(slots[i]);
  }
  void write_param(size_t i, std::span<const float> c) override { params_.at(i).write(c); }
  void read_param(size_t i, std::span<float> c) const override { params_.at(i).read_value(c); }
  void read_grad(size_t i, std::span<float> c) const override { params_.at(i).read_grad(c); }
  void refresh_compute_weights() override {
    for (auto& p : params_) p.refresh();
  }

 protected:
  // Declares a parameter: its spec for the trainer and its master layout; add views after.
  Param& add_param(std::shared_ptr<Context> ctx, std::string name, ParamRole role, const Dims& canonical, const md& master) {
    params_.emplace_back(std::move(ctx), name, master, canonical);
    this->params_specs().push_back(ParamSpec{std::move(name), canonical, role, params_.back().storage_elems()});
    return params_.back();
  }
  std::vector<Param> params_;
};

}  // namespace dlperf::onednn
