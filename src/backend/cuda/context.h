// The CUDA backend's shared pieces: the Context (device, the one compute stream, cuDNN and
// cuBLAS handles, the shared workspace and scratch, memory accounting), the tensor, parameter
// storage with its low-precision compute copy, and the GEMM helpers every matrix op uses.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/handles.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace dlperf::cuda {

class GraphPlan;
class HostUpload;

static_assert(static_cast<int>(ElemType::f32) == static_cast<int>(DType::f32) &&
                  static_cast<int>(ElemType::bf16) == static_cast<int>(DType::bf16) &&
                  static_cast<int>(ElemType::f16) == static_cast<int>(DType::f16) &&
                  static_cast<int>(ElemType::s32) == static_cast<int>(DType::s32),
              "kernels.h's ElemType mirrors DType");
inline ElemType elem(DType t) { return static_cast<ElemType>(t); }
static_assert(kGateSkip == gate_index(GateField::skip) && kGateGradScale == gate_index(GateField::grad_scale) &&
                  kGateLr == gate_index(GateField::lr) && kGateApplied == gate_index(GateField::applied) &&
                  kGateLossScale == gate_index(GateField::loss_scale) && kGateGoodSteps == gate_index(GateField::good_steps) &&
                  kGateSkipped == gate_index(GateField::skipped) && kGateGradNorm == gate_index(GateField::grad_norm) &&
                  kGateCount == kGateFloats,
              "kernels.h's GateIndex mirrors GateField");
cudnnDataType_t cudnn_type(DType t);
cudaDataType_t cublas_type(DType t);

// Device memory that grows at plan time to the largest request and is shared by every op:
// all ops run in order on the one stream, so no two use it at once. Ops ask for it again at
// run time (the pointer changes when a later plan grows it).
class SharedArea {
 public:
  explicit SharedArea(MemoryCounter& counter) : counter_(counter) {}
  void reserve(size_t bytes);
  void* get() const { return mem_.get(); }
  template <class T>
  T* get() const { return static_cast<T*>(mem_.get()); }
  size_t bytes() const { return mem_.bytes(); }

 private:
  MemoryCounter& counter_;
  DeviceMemory mem_;
};

// Which units a planned kernel's products run on, as its library reports it: not_matmul for
// bandwidth-bound kernels (normalisations, element-wise), where tensor cores do not apply.
enum class MathUnits : uint8_t { not_matmul, tensor_cores, cuda_cores };

struct Context {
  Context(int device_ordinal, Precision precision, bool conv_autotune, bool deterministic);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device = 0;
  Precision precision = Precision::fp32;
  bool conv_autotune = false;  // time the top cuDNN engine configurations per convolution
  bool deterministic = true;   // backward convolutions on deterministic engines only (--deterministic)
  BackendOptions::BatchNormImpl batch_norm = BackendOptions::BatchNormImpl::automatic;  // channels-last batch norm's choice
  BackendOptions::AttentionImpl attention = BackendOptions::AttentionImpl::automatic;  // causal attention's (--attention)
  cudaDeviceProp props{};
  MemoryCounter memory;  // declared before every allocation below: destroyed after them
  Stream stream;
  CudnnHandle cudnn;
  CublasHandle cublas;
  CublasLtHandle cublas_lt;
  SharedArea workspace{memory};  // cuDNN algorithm workspaces
  SharedArea scratch{memory};    // op temporaries (masked gradients, f16 filter gradients)

  cudaStream_t s() const { return stream.get(); }
  DeviceMemory alloc(size_t bytes) { return DeviceMemory(bytes, memory); }
  void sync() { DLPERF_CHECK(cudaStreamSynchronize(stream.get())); }
  // A vector of `count` ones of type t, for the GEMMs that sum rows or columns (bias gradients).
  const void* ones(DType t, int64_t count);

  // Math modes per precision. fp32: IEEE f32 (cuDNN FMA math, cuBLAS pedantic f32); tf32: TF32
  // tensor cores allowed for f32 data; f16/bf16 data: tensor cores with f32 accumulation.
  bool tf32() const { return precision == Precision::tf32; }
  cudnnMathType_t conv_math(DType data) const;
  cublasComputeType_t gemm_compute(DType in) const;

  // The cuBLAS math asked for in-dtype GEMMs, for kernel records ("f32 pedantic", "tf32
  // tensor cores", "tensor cores, f32 accumulation"); cuBLAS does not say which kernel it runs.
  std::string gemm_math_name(DType in) const;
  // Every kernel planned, for Backend::planned_kernels() (printed, and stored in the trace):
  // op = the layer's name (or the op's kind), pass = "forward", "backward_data", ... A
  // convolution passes the units its engine runs on: under tf32/bf16/fp16 one without tensor
  // cores is recorded as a reference kernel (run.cpp warns: the run measures a fallback).
  void record_kernel(std::string op, std::string pass, std::string shape, std::string impl, MathUnits units = MathUnits::not_matmul);
  // A fast path that cannot be planned on this GPU / library: records the fallback (marked so
  // in its implementation name) and warns on stderr once per (pass, fallback) with the reason.
  // counted: under tf32/bf16/fp16 the fallback is a reference kernel on the `kernels:` line
  // whatever its units (attention on cuBLAS products stands in for cuDNN's fused SDPA).
  void warn_fallback(std::string op, std::string pass, std::string shape, const std::string& fallback, const std::string& why,
                     MathUnits units = MathUnits::not_matmul, bool counted = false);
  std::vector<PlannedKernel> kernels;
  // cuDNN graph-API plans by shape (conv_graph.cpp); null with a reason where none qualifies.
  std::map<std::string, std::shared_ptr<const GraphPlan>> graph_plans;
  std::map<std::string, std::string> graph_failures;

 private:
  std::set<std::string> warned_;
  std::vector<DeviceMemory> ones_;  // indexed by DType
  std::vector<int64_t> ones_count_;
};
using Ctx = std::shared_ptr<Context>;

// A tensor in device memory: dense, canonical row-major or (for 4-D) channels-last NHWC; a
// 2-D tensor may have a row pitch wider than its columns (the tied decoder's logits, (M, V)
// stored (M, V padded to 8)): the padding columns stay zero.
class CudaTensor final : public Tensor {
 public:
  CudaTensor(Ctx ctx, Dims dims, DType dtype, Layout layout, int64_t pitch = 0);  // pitch 0: dense
  // A dense canonical tensor over device memory it does not own (Backend::rows_of).
  CudaTensor(Ctx ctx, Dims dims, DType dtype, void* borrowed);
  ~CudaTensor() override;

  size_t storage_bytes() const override { return borrowed_ ? static_cast<size_t>(numel()) * dtype_size(dtype()) : mem_.bytes(); }
  void read(std::span<float> out) const override;
  void write(std::span<const float> in) override;
  void write_indices(std::span<const int32_t> in) override;
  void write_bytes(const void* src, size_t bytes) override;
  void zero() override;

  bool same_layout(const Tensor& other) const override {
    const auto& o = static_cast<const CudaTensor&>(other);
    return dims() == other.dims() && dtype() == other.dtype() && layout_ == o.layout_ && pitch_ == o.pitch_;
  }
  Layout layout() const { return layout_; }
  int64_t pitch() const { return pitch_; }  // row pitch of a 2-D tensor (its columns when dense)
  bool padded() const { return dims().size() == 2 && pitch_ != dims()[1]; }
  bool nhwc() const { return layout_ == Layout::channels_last; }
  void* data() const { return borrowed_ ? borrowed_ : mem_.get(); }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }

 private:
  Ctx ctx_;
  Layout layout_;
  int64_t pitch_ = 0;
  DeviceMemory mem_;
  void* borrowed_ = nullptr;  // set: a view, mem_ empty
  // write_bytes / write_indices from host memory (the per-step input batch): made on first use.
  std::unique_ptr<HostUpload> upload_;
  void upload(const void* src, size_t bytes);
};

const CudaTensor& dev(const Tensor& t);
CudaTensor& dev(Tensor& t);

// (N, C, H*W) of a 4-D tensor, (rows, cols, 1) of a 2-D one: the shape convert works on.
struct Nchw {
  int64_t n = 1, c = 1, hw = 1;
};
Nchw nchw_of(const Dims& d);

// Converts any (dtype, layout) to any over the same dims, on the stream.
void convert(Context& ctx, const void* src, DType src_type, bool src_nhwc, void* dst, DType dst_type, bool dst_nhwc,
             const Dims& dims);

// One parameter. The f32 master values and gradients live in the trainer's flat buffers in
// the canonical layout (KCRS for convolutions, (out, in) for linear), storage_elems = numel;
// a table may be stored with its rows padded to a multiple (pad_rows_to): the padding rows sit
// after the canonical ones and stay zero (BERT's vocabulary padded to a multiple of 8, so the
// tied decoder's GEMMs are tensor-core aligned; the parameter count is still the canonical one).
// An op that computes in f16/bf16, or wants a filter as KRSC (channels-last cuDNN), reads a
// compute copy that refresh() rebuilds from the master once per step; otherwise it reads the
// master directly.
class Param {
 public:
  Param(Ctx ctx, Dims canonical, DType compute, bool channels_last_filter, int64_t pad_rows_to = 1);
  size_t storage_elems() const { return static_cast<size_t>(product(stored_)); }
  size_t canonical_elems() const { return static_cast<size_t>(product(dims_)); }
  const Dims& stored_dims() const { return stored_; }  // dims with the padded rows
  void bind(const ParamSlot& slot);
  void refresh();
  void write(std::span<const float> canonical);
  void read_value(std::span<float> canonical) const;
  void read_grad(std::span<float> canonical) const;

  // The refresh of this parameter's compute copy as one segment of launch_cast_segments; false
  // when it has no copy.
  bool cast_segment(CastSegment& out) const;

  float* value() const { return slot_.value; }  // f32 master, canonical
  float* grad() const { return slot_.grad; }    // f32, canonical
  const void* compute() const { return copy_.get() ? copy_.get() : slot_.value; }
  bool has_copy() const { return copy_.get() != nullptr; }

 private:
  Ctx ctx_;
  Dims dims_, stored_;
  DType compute_;
  bool krsc_ = false;
  ParamSlot slot_{};
  DeviceMemory copy_;  // compute dtype / layout, when it differs from the master
};

// What the backend's one-launch weight refresh needs from a layer: its parameters.
class ParamOwner {
 public:
  virtual std::span<const Param> cuda_params() const = 0;

 protected:
  ~ParamOwner() = default;
};

// The Layer plumbing shared by the ops with parameters; Interface is the op's abstract class.
template <class Interface>
class WithParams : public Interface, public ParamOwner {
 public:
  std::span<const Param> cuda_params() const override { return params_; }
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
  Param& add_param(const Ctx& ctx, std::string name, ParamRole role, const Dims& canonical, DType compute,
                   bool channels_last_filter = false, int64_t pad_rows_to = 1) {
    params_.emplace_back(ctx, canonical, compute, channels_last_filter, pad_rows_to);
    this->params_specs().push_back(ParamSpec{std::move(name), canonical, role, params_.back().storage_elems()});
    return params_.back();
  }
  std::vector<Param> params_;
};

// "(32, 64, 56, 56) f16 nhwc": a planned problem, for the kernel record.
std::string shape_str(const Dims& dims, DType t, bool nhwc = false);

// Sets a cuDNN 4-D tensor descriptor for (n, c, h, w) stored NCHW or NHWC.
void set_4d(const TensorDesc& d, DType t, bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w);

// Row-major GEMM on cuBLAS, batched with fixed strides (batch 1 for plain matrices):
//   z (m, n) = alpha * op(x) op(y) + beta * z,  x stored (m, k) or (k, m) when trans_x,
//   y stored (k, n) or (n, k) when trans_y.
// x and y have type in_type, z out_type (f32 gradients from f16/bf16 inputs); math in f32.
struct GemmShape {
  bool trans_x = false, trans_y = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
};
void gemm(Context& ctx, const GemmShape& g, float alpha, const void* x, const void* y, DType in_type, float beta, void* z,
          DType out_type);
// The same with explicit storage: each stored matrix has a row pitch (elements between rows,
// its column count when dense) and a batch stride (elements between batch entries).
struct GemmOperand {
  const void* p = nullptr;
  int64_t pitch = 0, stride = 0;
};
void gemm_ex(Context& ctx, const GemmShape& g, float alpha, GemmOperand x, GemmOperand y, DType in_type, float beta, GemmOperand z,
             DType out_type);

// The same over arrays of matrix pointers in device memory (g.batch of each; x, y, z as in
// gemm_ex, each with its row pitch): one cublasGemmBatchedEx call for batches no single stride
// describes (BERT's (image, head) batch of head-interleaved operands).
struct GemmPointers {
  const void* const* x = nullptr;
  const void* const* y = nullptr;
  void* const* z = nullptr;
  int64_t x_pitch = 0, y_pitch = 0, z_pitch = 0;
};
void gemm_batched(Context& ctx, const GemmShape& g, float alpha, const GemmPointers& p, DType in_type, float beta, DType out_type);

// out (cols) f32 = sum over rows of a row-major (rows, cols) matrix x: a GEMM against ones.
void column_sums(Context& ctx, const void* x, DType t, int64_t rows, int64_t cols, float* out);
// out (rows) f32 = sum over cols of each row.
void row_sums(Context& ctx, const void* x, DType t, int64_t rows, int64_t cols, float* out);

}  // namespace dlperf::cuda
