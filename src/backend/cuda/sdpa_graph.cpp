// cuDNN's fused SDPA graphs (see sdpa_graph.h). The operation order, the data types of the
// intermediate tensors and the strides follow cudnn-frontend's composite SDPA forward and
// backward nodes, which is what cuDNN's fused attention engines recognise.
#include "backend/cuda/sdpa_graph.h"

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/kernels.h"

namespace dlperf::cuda {
namespace {

using Dims4 = std::vector<int64_t>;

// Unique ids of the tensors that carry data (the variant pack's); virtual ones count from kFirstVirtual.
enum : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSum,
  kDQAccum,
  kScale,
  kNegInf,
  kOne,
  kFirstVirtual = 100
};

constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

// Operations and virtual tensors of one graph, added in order.
class Builder {
 public:
  explicit Builder(std::shared_ptr<Graph> g) : g_(std::move(g)) {}
  const BackendDesc& data(int64_t uid, cudnnDataType_t t, const Dims4& dims, const Dims4& strides) { return g_->tensor(uid, t, dims, strides); }
  const BackendDesc& virt(cudnnDataType_t t, const Dims4& dims, const Dims4& strides) { return g_->tensor(next_++, t, dims, strides, true); }
  const BackendDesc& scalar(int64_t uid) { return g_->scalar(uid, kF32); }

  // y = mode(x[, b[, t]]); math in `prec`; GEN_INDEX along `axis`
  void pointwise(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc* b, const BackendDesc* t, const BackendDesc& y,
                 cudnnDataType_t prec = kF32, int64_t axis = -1) {
    BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set_i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize();
    const BackendDesc& desc = g_->keep(std::move(pw));
    BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc).set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op.finalize();
    g_->add(std::move(op));
  }
  void unary(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc& y) { pointwise(mode, x, nullptr, nullptr, y); }
  void binary(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc& b, const BackendDesc& y) { pointwise(mode, x, &b, nullptr, y); }

  // c = a b over the last two dimensions, batched (and broadcast) over the first two; f32 math
  void matmul(const BackendDesc& a, const BackendDesc& b, const BackendDesc& c) {
    BackendDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set_type(CUDNN_ATTR_MATMUL_COMP_TYPE, kF32);
    mm.finalize();
    const BackendDesc& desc = g_->keep(std::move(mm));
    BackendDesc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc);
    op.finalize();
    g_->add(std::move(op));
  }

  // y = reduce(x) over the dimensions where y has extent 1
  void reduce(cudnnReduceTensorOp_t how, const BackendDesc& x, const BackendDesc& y) {
    BackendDesc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how).set_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, kF32);
    red.finalize();
    const BackendDesc& desc = g_->keep(std::move(red));
    BackendDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc);
    op.finalize();
    g_->add(std::move(op));
  }

  // y = x seen with other dimensions and strides (a transpose, in the fused kernel)
  void reshape(const BackendDesc& x, const BackendDesc& y) {
    BackendDesc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize();
    g_->add(std::move(op));
  }

  // The causal mask of scores x (B, H, T, T): y = row >= col ? x : -inf
  const BackendDesc& causal(const BackendDesc& x, const BackendDesc& neg_inf, const Dims4& dims, const Dims4& strides) {
    const BackendDesc& row = virt(CUDNN_DATA_INT32, dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, row, kF32, 2);
    const BackendDesc& col = virt(CUDNN_DATA_INT32, dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, col, kF32, 3);
    const BackendDesc& keep = virt(CUDNN_DATA_BOOLEAN, dims, strides);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep, CUDNN_DATA_BOOLEAN);
    const BackendDesc& y = virt(kF32, dims, strides);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, &neg_inf, &keep, y);
    return y;
  }

 private:
  std::shared_ptr<Graph> g_;
  int64_t next_ = kFirstVirtual;
};

// The shapes of one problem, as cuDNN sees them: (B, H, T, D) over dlperf's (B*T, H*D) row-major.
struct Layouts {
  explicit Layouts(const SdpaShape& s) : b(s.batch), hq(s.heads), hk(s.kv_heads), t(s.seq_len), d(s.head_dim) {}
  int64_t b, hq, hk, t, d;
  Dims4 q_dims() const { return {b, hq, t, d}; }
  Dims4 q_strides() const { return {t * hq * d, d, hq * d, 1}; }
  Dims4 kv_dims() const { return {b, hk, t, d}; }
  Dims4 kv_strides() const { return {t * hk * d, d, hk * d, 1}; }
  Dims4 kvt_dims() const { return {b, hk, d, t}; }  // K^T, V^T: the same memory
  Dims4 kvt_strides() const { return {t * hk * d, d, 1, hk * d}; }
  Dims4 s_dims() const { return {b, hq, t, t}; }
  Dims4 s_strides() const { return {hq * t * t, t * t, t, 1}; }
  Dims4 st_strides() const { return {hq * t * t, t * t, 1, t}; }  // (B, H, keys, queries) of the same scores
  Dims4 row_dims() const { return {b, hq, t, 1}; }
  Dims4 row_strides() const { return {hq * t, t, 1, 1}; }
  Dims4 full_strides() const { return {hq * t * d, t * d, d, 1}; }  // dense (B, H, T, D)
};

std::shared_ptr<Graph> forward_ops(const SdpaShape& s) {
  auto g = std::make_shared<Graph>();
  Builder x(g);
  const Layouts l(s);
  const cudnnDataType_t dt = cudnn_type(s.dtype);
  const BackendDesc& q = x.data(kQ, dt, l.q_dims(), l.q_strides());
  const BackendDesc& kt = x.data(kK, dt, l.kvt_dims(), l.kvt_strides());
  const BackendDesc& v = x.data(kV, dt, l.kv_dims(), l.kv_strides());
  const BackendDesc& o = x.data(kO, dt, l.q_dims(), l.q_strides());
  const BackendDesc& stats = x.data(kStats, kF32, l.row_dims(), l.row_strides());
  const BackendDesc& scale = x.scalar(kScale);
  const BackendDesc& neg_inf = x.scalar(kNegInf);
  const Dims4 sd = l.s_dims(), ss = l.s_strides(), rd = l.row_dims(), rs = l.row_strides();

  const BackendDesc& s0 = x.virt(kF32, sd, ss);
  x.matmul(q, kt, s0);
  const BackendDesc& s1 = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_MUL, s0, scale, s1);
  const BackendDesc& s2 = x.causal(s1, neg_inf, sd, ss);
  // softmax, with its statistics
  const BackendDesc& max = x.virt(kF32, rd, rs);
  x.reduce(CUDNN_REDUCE_TENSOR_MAX, s2, max);
  const BackendDesc& centred = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_SUB, s2, max, centred);
  const BackendDesc& e = x.virt(kF32, sd, ss);
  x.unary(CUDNN_POINTWISE_EXP, centred, e);
  const BackendDesc& sum = x.virt(kF32, rd, rs);
  x.reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const BackendDesc& log_sum = x.virt(kF32, rd, rs);
  x.unary(CUDNN_POINTWISE_LOG, sum, log_sum);
  x.binary(CUDNN_POINTWISE_ADD, max, log_sum, stats);
  const BackendDesc& p = x.virt(dt, sd, ss);  // the probabilities in the data type, for P V
  x.binary(CUDNN_POINTWISE_DIV, e, sum, p);
  x.matmul(p, v, o);
  return g;
}

std::shared_ptr<Graph> backward_ops(const SdpaShape& s) {
  auto g = std::make_shared<Graph>();
  Builder x(g);
  const Layouts l(s);
  const cudnnDataType_t dt = cudnn_type(s.dtype);
  const BackendDesc& q = x.data(kQ, dt, l.q_dims(), l.q_strides());
  const BackendDesc& kt = x.data(kK, dt, l.kvt_dims(), l.kvt_strides());
  const BackendDesc& vt = x.data(kV, dt, l.kvt_dims(), l.kvt_strides());
  const BackendDesc& o = x.data(kO, dt, l.q_dims(), l.q_strides());
  const BackendDesc& dout = x.data(kDO, dt, l.q_dims(), l.q_strides());
  const BackendDesc& stats = x.data(kStats, kF32, l.row_dims(), l.row_strides());
  const BackendDesc& dq = x.data(kDQ, dt, l.q_dims(), l.q_strides());
  const BackendDesc& dk = x.data(kDK, dt, l.kv_dims(), l.kv_strides());
  const BackendDesc& dv = x.data(kDV, dt, l.kv_dims(), l.kv_strides());
  const BackendDesc& row_sum = x.data(kSum, kF32, l.row_dims(), l.row_strides());
  const BackendDesc& dq_accum = x.data(kDQAccum, kF32, l.q_dims(), l.full_strides());
  const BackendDesc& scale = x.scalar(kScale);
  const BackendDesc& neg_inf = x.scalar(kNegInf);
  const BackendDesc& one = x.scalar(kOne);
  const Dims4 sd = l.s_dims(), ss = l.s_strides(), rd = l.row_dims(), rs = l.row_strides();
  const bool grouped = l.hq != l.hk;

  // sum = rowsum(dO * O)
  const BackendDesc& prod = x.virt(kF32, l.q_dims(), {l.hq * l.t * l.d, l.t * l.d, l.hq * l.d, 1});
  x.binary(CUDNN_POINTWISE_MUL, dout, o, prod);
  const BackendDesc& reduced = x.virt(kF32, rd, rs);
  x.reduce(CUDNN_REDUCE_TENSOR_ADD, prod, reduced);
  x.binary(CUDNN_POINTWISE_MUL, reduced, one, row_sum);
  // P = exp(Q K^T * scale - Stats), masked
  const BackendDesc& s0 = x.virt(kF32, sd, ss);
  x.matmul(q, kt, s0);
  const BackendDesc& s1 = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_MUL, s0, scale, s1);
  const BackendDesc& s2 = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_SUB, s1, stats, s2);
  const BackendDesc& s3 = x.causal(s2, neg_inf, sd, ss);
  const BackendDesc& p = x.virt(kF32, sd, ss);
  x.unary(CUDNN_POINTWISE_EXP, s3, p);
  // dV = P^T dO (summed over each group's query heads)
  const BackendDesc& pt = x.virt(dt, sd, l.st_strides());
  x.reshape(p, pt);
  if (!grouped) {
    x.matmul(pt, dout, dv);
  } else {
    const BackendDesc& dv_heads = x.virt(dt, l.q_dims(), l.full_strides());
    x.matmul(pt, dout, dv_heads);
    x.reduce(CUDNN_REDUCE_TENSOR_ADD, dv_heads, dv);
  }
  // dS = P (dO V^T - sum) * scale
  const BackendDesc& dp = x.virt(kF32, sd, ss);
  x.matmul(dout, vt, dp);
  const BackendDesc& centred = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_SUB, dp, row_sum, centred);
  const BackendDesc& weighted = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_MUL, centred, p, weighted);
  const BackendDesc& ds = x.virt(kF32, sd, ss);
  x.binary(CUDNN_POINTWISE_MUL, weighted, scale, ds);
  // dK = dS^T Q (summed over each group's query heads)
  const BackendDesc& dst = x.virt(dt, sd, l.st_strides());
  x.reshape(ds, dst);
  if (!grouped) {
    x.matmul(dst, q, dk);
  } else {
    const BackendDesc& dk_heads = x.virt(dt, l.q_dims(), l.full_strides());
    x.matmul(dst, q, dk_heads);
    x.reduce(CUDNN_REDUCE_TENSOR_ADD, dk_heads, dk);
  }
  // dQ = dS K, accumulated in f32, then converted
  const BackendDesc& k = x.virt(kF32, l.kv_dims(), l.kv_strides());  // a view; f32 as the frontend types it
  x.reshape(kt, k);
  x.matmul(ds, k, dq_accum);
  x.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
  return g;
}

// Scratch operands for the plan-time trial runs, filled with noise.
struct TrialBuffers {
  TrialBuffers(Context& ctx, const SdpaShape& s) {
    const size_t e = dtype_size(s.dtype);
    const int64_t nq = s.batch * s.seq_len * s.heads * s.head_dim, nkv = s.batch * s.seq_len * s.kv_heads * s.head_dim;
    for (DeviceMemory* m : {&q, &o, &dout, &dq}) *m = ctx.alloc(static_cast<size_t>(nq) * e);
    for (DeviceMemory* m : {&k, &v, &dk, &dv}) *m = ctx.alloc(static_cast<size_t>(nkv) * e);
    // lse and the row sums apart: cuDNN is told each tensor starts on 16 bytes
    for (DeviceMemory* m : {&stats, &sums}) *m = ctx.alloc(static_cast<size_t>(s.batch * s.heads * s.seq_len) * sizeof(float));
    uint64_t seed = 1;
    for (DeviceMemory* m : {&q, &o, &dout}) DLPERF_CHECK(launch_fill_uniform(m->get(), elem(s.dtype), nq, seed++, ctx.s()));
    for (DeviceMemory* m : {&k, &v}) DLPERF_CHECK(launch_fill_uniform(m->get(), elem(s.dtype), nkv, seed++, ctx.s()));
  }
  DeviceMemory q, k, v, o, dout, dq, dk, dv, stats, sums;
};

}  // namespace

std::shared_ptr<Graph> sdpa_operations(const SdpaShape& s, bool backward) { return backward ? backward_ops(s) : forward_ops(s); }

std::string sdpa_unsupported(const Context& ctx, const SdpaShape& s) {
  if (s.dtype != DType::bf16 && s.dtype != DType::f16) return "cuDNN's fused attention takes bf16 or fp16 data";
  if (s.head_dim % 8 != 0 || s.head_dim > 128) return "cuDNN's fused attention takes a head dim that is a multiple of 8, up to 128";
  if (ctx.props.major < 8) return "cuDNN's fused attention needs compute capability 8.0 or newer";
  // The graphs below are cudnn-frontend's for cuDNN 9.10.2 and newer: before 9.6 the dQ
  // accumulator had to be zeroed before each backward, before 9.10 the mask value differed, and
  // the frontend refuses the backward on 9.10.0 and 9.10.1 (known bugs).
  if (const size_t v = cudnnGetVersion(); v < 91002)
    return "cuDNN's fused attention here needs cuDNN 9.10.2 or newer at run time (loaded: " + std::to_string(v / 10000) + "." +
           std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) + ")";
  return {};
}

size_t FusedSdpa::dq_accum_bytes() const {
  return static_cast<size_t>(s_.batch * s_.heads * s_.seq_len * s_.head_dim) * sizeof(float);
}

FusedSdpa::FusedSdpa(Context& ctx, const SdpaShape& s)
    : s_(s), scale_(1.0f / std::sqrt(static_cast<float>(s.head_dim))), neg_inf_(-std::numeric_limits<float>::infinity()) {
  if (std::string why = sdpa_unsupported(ctx, s); !why.empty()) throw Error(ErrorKind::library, why);
  ctx.scratch.reserve(dq_accum_bytes());
  // Planned once per shape and context: every layer of a model shares the plans (cuDNN compiles
  // its attention kernels at plan time, seconds each), as convolutions share theirs.
  const std::string key = "sdpa " + std::to_string(s.batch) + "x" + std::to_string(s.seq_len) + " heads " + std::to_string(s.heads) + "/" +
                          std::to_string(s.kv_heads) + " d " + std::to_string(s.head_dim) + " " + std::string(to_string(s.dtype)) +
                          (ctx.deterministic ? " deterministic" : "");
  const std::string fwd_key = key + " forward", bwd_key = key + " backward";
  if (auto it = ctx.graph_plans.find(bwd_key); it != ctx.graph_plans.end()) {
    if (!it->second) throw Error(ErrorKind::library, ctx.graph_failures[bwd_key]);
    fwd_ = ctx.graph_plans.at(fwd_key);
    bwd_ = it->second;
    return;
  }
  try {
    PlanPolicy policy;
    policy.deterministic = ctx.deterministic;
    policy.want_tensor_cores = true;
    auto t = std::make_shared<TrialBuffers>(ctx, s);
    float* lse = t->stats.as<float>();
    float* sum = t->sums.as<float>();
    auto fwd_graph = sdpa_operations(s, false);
    fwd_graph->finalize(ctx.cudnn);
    fwd_ = std::make_shared<const GraphPlan>(plan_graph(ctx, std::move(fwd_graph), policy, [&](GraphPlan& p) {
      VariantPackCache cache;
      p.execute(ctx, cache,
                {{kQ, t->q.get()}, {kK, t->k.get()}, {kV, t->v.get()}, {kO, t->o.get()}, {kStats, lse}, {kScale, &scale_}, {kNegInf, &neg_inf_}});
    }));
    forward(ctx, t->q.get(), t->k.get(), t->v.get(), t->o.get(), lse);  // the statistics the backward trial reads
    auto bwd_graph = sdpa_operations(s, true);
    bwd_graph->finalize(ctx.cudnn);
    bwd_ = std::make_shared<const GraphPlan>(plan_graph(ctx, std::move(bwd_graph), policy, [&](GraphPlan& p) {
      VariantPackCache cache;
      p.execute(ctx, cache,
                {{kQ, t->q.get()}, {kK, t->k.get()}, {kV, t->v.get()}, {kO, t->o.get()}, {kDO, t->dout.get()}, {kStats, lse},
                 {kSum, sum}, {kDQAccum, ctx.scratch.get()}, {kDQ, t->dq.get()}, {kDK, t->dk.get()}, {kDV, t->dv.get()},
                 {kScale, &scale_}, {kNegInf, &neg_inf_}, {kOne, &one_}});
    }));
    ctx.sync();  // the trial runs finish before their buffers go
  } catch (const Error& e) {
    ctx.graph_plans[bwd_key] = nullptr;  // later layers of this shape fall back at once, with the same reason
    ctx.graph_failures[bwd_key] = e.what();
    throw;
  }
  ctx.graph_plans[fwd_key] = fwd_;
  ctx.graph_plans[bwd_key] = bwd_;
}

void FusedSdpa::forward(Context& ctx, const void* q, const void* k, const void* v, void* o, float* lse) {
  auto p = [](const void* x) { return const_cast<void*>(x); };
  fwd_->execute(ctx, fwd_cache_,
               {{kQ, p(q)}, {kK, p(k)}, {kV, p(v)}, {kO, o}, {kStats, lse}, {kScale, &scale_}, {kNegInf, &neg_inf_}});
}

void FusedSdpa::backward(Context& ctx, const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse,
                         float* sum, void* dq, void* dk, void* dv) {
  auto p = [](const void* x) { return const_cast<void*>(x); };
  bwd_->execute(ctx, bwd_cache_,
               {{kQ, p(q)}, {kK, p(k)}, {kV, p(v)}, {kO, p(o)}, {kDO, p(dout)}, {kStats, p(lse)}, {kSum, sum},
                {kDQAccum, ctx.scratch.get()}, {kDQ, dq}, {kDK, dk}, {kDV, dv}, {kScale, &scale_}, {kNegInf, &neg_inf_}, {kOne, &one_}});
}

}  // namespace dlperf::cuda
