// cuDNN graph API wrappers and the plan search (see cudnn_graph.h). The engine filters follow
// the numerical notes cuDNN attaches to each engine, as PyTorch's cuDNN v8 convolution path
// does: no engine that down-converts inputs, none that is nondeterministic where the op must be
// reproducible, and for f32 data no tensor-core (TF32) engine unless TF32 is allowed.
#include "backend/cuda/cudnn_graph.h"

#include <algorithm>
#include <array>
#include <optional>

namespace dlperf::cuda {

BackendDesc::BackendDesc(cudnnBackendDescriptorType_t type) { DLPERF_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
BackendDesc::~BackendDesc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

BackendDesc& BackendDesc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  DLPERF_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
  return *this;
}
void BackendDesc::finalize() { DLPERF_CHECK(cudnnBackendFinalize(d_)); }
cudnnStatus_t BackendDesc::try_finalize() { return cudnnBackendFinalize(d_); }

std::vector<int64_t> image_strides(const std::vector<int64_t>& d, bool nhwc) {
  const int64_t c = d[1], h = d[2], w = d[3];
  if (nhwc) return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
}

const BackendDesc& Graph::tensor(int64_t uid, DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                 bool is_virtual) {
  return tensor(uid, cudnn_type(t), dims, strides, is_virtual);
}

const BackendDesc& Graph::tensor(int64_t uid, cudnnDataType_t t, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                 bool is_virtual) {
  BackendDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, t)
      .set_i64(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
      .set_i64(CUDNN_ATTR_TENSOR_STRIDES, strides)
      .set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
      .set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)  // every dlperf tensor is a cudaMalloc'd block (256-byte aligned)
      .set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
  d.finalize();
  return keep(std::move(d));
}

const BackendDesc& Graph::scalar(int64_t uid, cudnnDataType_t t) {
  BackendDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, t)
      .set_i64(CUDNN_ATTR_TENSOR_DIMENSIONS, std::vector<int64_t>{1, 1, 1, 1})  // a pointwise op's inputs share its rank
      .set_i64(CUDNN_ATTR_TENSOR_STRIDES, std::vector<int64_t>{1, 1, 1, 1})
      .set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
      .set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
      .set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, false)
      .set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  d.finalize();
  return keep(std::move(d));
}

const BackendDesc& Graph::keep(BackendDesc d) {
  owned_.push_back(std::make_unique<BackendDesc>(std::move(d)));
  return *owned_.back();
}

void Graph::add(BackendDesc op) { ops_.push_back(std::move(op)); }

void Graph::finalize(cudnnHandle_t h) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& op : ops_) raw.push_back(op.get());
  graph_.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
  graph_.finalize();
}

void GraphPlan::execute(Context& ctx, VariantPackCache& cache, const std::vector<std::pair<int64_t, void*>>& data) const {
  void* ws = ctx.workspace.get();
  if (!cache.pack || data != cache.data || ws != cache.workspace) {
    std::vector<int64_t> uids;
    std::vector<void*> ptrs;
    for (const auto& [uid, p] : data) {
      uids.push_back(uid);
      ptrs.push_back(p);
    }
    auto pack = std::make_shared<BackendDesc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack->set_i64(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()), ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    pack->finalize();
    cache.pack = std::move(pack);
    cache.data = data;
    cache.workspace = ws;
  }
  DLPERF_CHECK(cudnnBackendExecute(ctx.cudnn, plan_->get(), cache.pack->get()));
}

namespace {

// The engine configurations of one heuristics mode, best first (none when the mode has none).
std::vector<std::shared_ptr<BackendDesc>> heuristics(const Graph& g, cudnnBackendHeurMode_t mode) {
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.get()).set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr) !=
          CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return {};
  std::vector<std::shared_ptr<BackendDesc>> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_shared<BackendDesc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  int64_t got = 0;
  DLPERF_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()));
  cfgs.resize(static_cast<size_t>(std::min(got, count)));
  return cfgs;
}

struct EngineInfo {
  int64_t index = -1;
  std::array<bool, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> note{};
};

EngineInfo engine_info(const BackendDesc& cfg) {
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  DLPERF_CHECK(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw));
  EngineInfo info;
  DLPERF_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  int64_t count = 0;
  DLPERF_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                        static_cast<int64_t>(notes.size()), &count, notes.data()));
  for (int64_t i = 0; i < count && i < static_cast<int64_t>(notes.size()); ++i) {
    const auto k = static_cast<size_t>(notes[static_cast<size_t>(i)]);
    if (k < info.note.size()) info.note[k] = true;
  }
  return info;
}

bool allowed(const EngineInfo& e, const PlanPolicy& p) {
  if (e.note[CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS]) return false;
  if (p.deterministic && e.note[CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC]) return false;
  if (p.f32_data && !p.allow_tensor_core_f32 && e.note[CUDNN_NUMERICAL_NOTE_TENSOR_CORE]) return false;
  return true;
}

// Runs the plan once on the trial buffers and waits for it: a plan that finalizes can still
// fail when executed (PyTorch's cuDNN v8 path tries its candidates in order for that reason).
// Returns the error's text, or "" when it ran.
std::string trial(Context& ctx, GraphPlan& plan, const std::function<void(GraphPlan&)>& run) {
  try {
    ctx.workspace.reserve(plan.workspace());
    run(plan);
    ctx.sync();
    return {};
  } catch (const Error& e) {
    (void)cudaGetLastError();  // clear a non-sticky launch error before the next candidate
    return e.what();
  }
}

// Median of `reps` timed runs, in milliseconds, after one untimed run.
float time_plan(Context& ctx, GraphPlan& plan, const std::function<void(GraphPlan&)>& run) {
  constexpr int reps = 5;
  cudaEvent_t start = nullptr, stop = nullptr;
  DLPERF_CHECK(cudaEventCreate(&start));
  DLPERF_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  try {
    run(plan);
    for (int i = 0; i < reps; ++i) {
      DLPERF_CHECK(cudaEventRecord(start, ctx.s()));
      run(plan);
      DLPERF_CHECK(cudaEventRecord(stop, ctx.s()));
      DLPERF_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      DLPERF_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

GraphPlan plan_graph(Context& ctx, std::shared_ptr<Graph> graph, const PlanPolicy& policy,
                     const std::function<void(GraphPlan&)>& run_for_timing) {
  std::vector<std::shared_ptr<BackendDesc>> cfgs = heuristics(*graph, CUDNN_HEUR_MODE_A);
  for (auto& c : heuristics(*graph, CUDNN_HEUR_MODE_FALLBACK)) cfgs.push_back(std::move(c));
  const bool tune = policy.autotune_candidates > 0 && run_for_timing;
  const size_t want = tune ? static_cast<size_t>(policy.autotune_candidates) : 1;
  std::vector<GraphPlan> candidates;
  std::vector<int64_t> seen;
  int rejected = 0, failed = 0;
  std::string first_failure;
  std::optional<GraphPlan> no_tensor_cores;  // the first plan that runs without them
  for (const auto& cfg : cfgs) {
    if (candidates.size() >= want) break;
    const EngineInfo info = engine_info(*cfg);
    if (!allowed(info, policy) || std::find(seen.begin(), seen.end(), info.index) != seen.end()) {
      ++rejected;
      continue;
    }
    auto plan = std::make_shared<BackendDesc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnHandle_t h = ctx.cudnn;
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h).set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfg);
    if (plan->try_finalize() != CUDNN_STATUS_SUCCESS) {
      ++rejected;
      continue;
    }
    int64_t ws = 0, n = 0;
    DLPERF_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws));
    if (ws < 0 || static_cast<size_t>(ws) > policy.workspace_limit) {
      ++rejected;
      continue;
    }
    GraphPlan p;
    p.graph_ = graph;
    p.config_ = cfg;
    p.plan_ = std::move(plan);
    p.workspace_ = static_cast<size_t>(ws);
    // --plan-only shows which engines use atomics (allowed without --deterministic)
    p.name_ = "engine " + std::to_string(info.index) + (info.note[CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC] ? " nondeterministic" : "");
    p.tensor_cores_ = info.note[CUDNN_NUMERICAL_NOTE_TENSOR_CORE];
    seen.push_back(info.index);
    // Without tensor cores where they are wanted: the first such plan is kept in reserve and
    // not run unless it is needed (CUDA-core engines on VGG16's 224x224 layers are slow to
    // trial; an H200 spent over 30 s planning VGG16 fp16 under --conv-autotune while every one
    // of them was trialled, the share of that not measured).
    if (policy.want_tensor_cores && !p.tensor_cores_) {
      if (!no_tensor_cores) no_tensor_cores = std::move(p);
      continue;
    }
    if (run_for_timing) {
      if (std::string err = trial(ctx, p, run_for_timing); !err.empty()) {
        if (failed++ == 0) first_failure = p.name_ + ": " + err;
        continue;  // the next candidate
      }
    }
    candidates.push_back(std::move(p));
  }
  if (candidates.empty() && no_tensor_cores) {  // none has them: the reserve, if it runs
    std::string err = run_for_timing ? trial(ctx, *no_tensor_cores, run_for_timing) : std::string();
    if (err.empty())
      candidates.push_back(std::move(*no_tensor_cores));
    else if (failed++ == 0)
      first_failure = no_tensor_cores->name_ + ": " + err;
  }
  if (candidates.empty())
    throw Error(ErrorKind::library, "cuDNN graph API: none of " + std::to_string(cfgs.size()) + " engine configurations qualifies (" +
                                        std::to_string(rejected) + " ruled out by numerics, support or workspace, " +
                                        std::to_string(failed) + " failed a trial run" +
                                        (first_failure.empty() ? "" : ", first: " + first_failure) + ")");
  if (!tune || candidates.size() == 1) return std::move(candidates.front());
  size_t best = candidates.size();
  float best_ms = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    try {  // one candidate that fails while timed is skipped, not the whole graph path
      ctx.workspace.reserve(candidates[i].workspace());
      const float ms = time_plan(ctx, candidates[i], run_for_timing);
      if (best == candidates.size() || ms < best_ms) best = i, best_ms = ms;
    } catch (const Error&) {
      (void)cudaGetLastError();
    }
  }
  if (best == candidates.size()) best = 0;  // every timing failed after every trial ran: keep the heuristics' first
  GraphPlan chosen = std::move(candidates[best]);
  chosen.name_ += " autotuned of " + std::to_string(candidates.size());
  return chosen;
}

}  // namespace dlperf::cuda
