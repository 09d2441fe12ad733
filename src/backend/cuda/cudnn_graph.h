// cuDNN's graph (backend) API, in libcudnn itself: operation graphs of tensors and operations,
// engine configurations ranked by cuDNN's heuristics, execution plans run with a variant pack of
// device pointers. The types here are the RAII wrappers and the plan search every graph user in
// the CUDA backend shares (convolutions, conv + bias + ReLU):
//
//   Graph g(ctx);                                   // tensors, operations
//   auto x = g.tensor(1, dtype, dims, strides);     // unique id 1
//   g.add(op);  ...  g.finalize();
//   GraphPlan p = plan_graph(ctx, g, policy, run);  // heuristics -> filters -> first that finalizes and runs
//   p.execute(ctx, {{1, x_ptr}, {2, w_ptr}, ...});  // or autotuned among the top candidates
//
// Every failure here is an Error(library) the caller catches to fall back to the legacy API.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/context.h"

namespace dlperf::cuda {

// One cudnnBackendDescriptor_t, owned. Attributes are set with the typed helpers; each call is
// checked, and the descriptor is finalized once.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type);
  ~BackendDesc();
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  BackendDesc(BackendDesc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  BackendDesc& operator=(BackendDesc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

  BackendDesc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  BackendDesc& set_i64(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
    return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
  }
  BackendDesc& set_i64(cudnnBackendAttributeName_t name, int64_t v) { return set(name, CUDNN_TYPE_INT64, 1, &v); }
  BackendDesc& set_f32(cudnnBackendAttributeName_t name, float v) { return set(name, CUDNN_TYPE_FLOAT, 1, &v); }
  BackendDesc& set_f64(cudnnBackendAttributeName_t name, double v) { return set(name, CUDNN_TYPE_DOUBLE, 1, &v); }
  BackendDesc& set_type(cudnnBackendAttributeName_t name, cudnnDataType_t t) { return set(name, CUDNN_TYPE_DATA_TYPE, 1, &t); }
  BackendDesc& set_bool(cudnnBackendAttributeName_t name, bool b) { return set(name, CUDNN_TYPE_BOOLEAN, 1, &b); }
  BackendDesc& set_desc(cudnnBackendAttributeName_t name, const BackendDesc& d) {
    cudnnBackendDescriptor_t raw = d.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  void finalize();
  cudnnStatus_t try_finalize();  // for plans an engine may reject: the status, nothing thrown

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// An operation graph under construction: owns its tensor and operation descriptors, so that
// they outlive every plan made from it (plans hold the graph through a shared_ptr).
class Graph {
 public:
  // A tensor of the graph. dims and strides in cuDNN's logical order, (N, C, H, W) for images,
  // whatever the memory layout (the strides say it). Virtual tensors live only inside a fused
  // kernel and need no pointer.
  const BackendDesc& tensor(int64_t uid, DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                            bool is_virtual = false);
  const BackendDesc& tensor(int64_t uid, cudnnDataType_t t, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                            bool is_virtual = false);
  // A scalar passed by value (dims and strides 1, 1, 1, 1: the rank of the 4-d operands): its variant-pack entry points to the
  // value in host memory, which must outlive every execution (attention's scale, -inf, 1).
  const BackendDesc& scalar(int64_t uid, cudnnDataType_t t);
  // Keeps a descriptor the operations refer to (convolution or pointwise descriptors).
  const BackendDesc& keep(BackendDesc d);
  void add(BackendDesc op);  // a finalized operation, in graph order
  void finalize(cudnnHandle_t h);
  const BackendDesc& get() const { return graph_; }

 private:
  std::vector<std::unique_ptr<BackendDesc>> owned_;  // tensors, op-level descriptors
  std::vector<BackendDesc> ops_;
  BackendDesc graph_{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
};

// What plan_graph may choose.
struct PlanPolicy {
  bool deterministic = false;  // drop engines with CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
  bool allow_tensor_core_f32 = true;  // f32 data: TF32 tensor cores allowed (false under --precision fp32)
  bool f32_data = false;
  size_t workspace_limit = size_t{1} << 30;
  int autotune_candidates = 0;  // > 0: time this many finalizable plans, keep the fastest
  // Tensor cores wanted (tf32, fp16, bf16): a plan without them is kept only when no later
  // configuration in the heuristics' and the fallback list has them. On an H200, VGG16's tf32
  // stem filter gradient (C = 4) got a CUDA-core engine as the heuristics' first choice.
  bool want_tensor_cores = false;
};

// The variant pack (device pointers by unique id, and the workspace) of the last execution of
// a plan by one caller: rebuilt only when the pointers change, which after the first step they
// do not (every op runs on the same tensors each step). One per op and direction, not per plan:
// plans are shared between ops of the same shape.
struct VariantPackCache {
  std::vector<std::pair<int64_t, void*>> data;
  void* workspace = nullptr;
  std::shared_ptr<BackendDesc> pack;
};

// A finalized execution plan with what it needs to run.
class GraphPlan {
 public:
  GraphPlan() = default;
  size_t workspace() const { return workspace_; }
  const std::string& name() const { return name_; }  // "engine 12", "engine 12 autotuned of 8"
  // tensor_cores when the engine has CUDNN_NUMERICAL_NOTE_TENSOR_CORE.
  MathUnits units() const { return tensor_cores_ ? MathUnits::tensor_cores : MathUnits::cuda_cores; }
  // Runs the plan on the context's stream: data pointers by unique id, the shared workspace.
  void execute(Context& ctx, VariantPackCache& cache, const std::vector<std::pair<int64_t, void*>>& data) const;

 private:
  friend GraphPlan plan_graph(Context& ctx, std::shared_ptr<Graph> graph, const PlanPolicy& policy,
                              const std::function<void(GraphPlan&)>& run_for_timing);
  std::shared_ptr<Graph> graph_;
  std::shared_ptr<BackendDesc> config_, plan_;
  size_t workspace_ = 0;
  std::string name_;
  bool tensor_cores_ = false;
};

// Asks cuDNN's heuristics (mode A, then the fallback list) for engine configurations of the
// finalized graph, drops those the policy rules out, and returns the first whose plan finalizes
// within the workspace limit and, when run_for_timing is given (it must call GraphPlan::execute
// on valid buffers of the graph's shapes), runs once without error: a plan that fails its trial
// run is skipped for the next. With policy.autotune_candidates > 0, times that many (each in
// its own try) and keeps the fastest.
// Throws Error(library) when no configuration qualifies.
GraphPlan plan_graph(Context& ctx, std::shared_ptr<Graph> graph, const PlanPolicy& policy,
                     const std::function<void(GraphPlan&)>& run_for_timing = {});

// Strides of a (N, C, H, W) tensor stored NCHW or NHWC, in cuDNN's logical dimension order.
std::vector<int64_t> image_strides(const std::vector<int64_t>& nchw, bool nhwc);

}  // namespace dlperf::cuda
