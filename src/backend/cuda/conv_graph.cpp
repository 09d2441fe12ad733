// Convolutions on cuDNN's graph API (conv_plan.h): one operation graph per direction,
//   fwd         CONVOLUTION_FORWARD      x (uid 1), w (2) -> y (3)
//   bwd_data    CONVOLUTION_BACKWARD_DATA  dy (3), w (2) -> dx (1)
//   bwd_filter  CONVOLUTION_BACKWARD_FILTER x (1), dy (3) -> dw (2)
// and the fused forward of VGG's layers, conv -> + bias -> ReLU, with f32 virtual tensors
// between the three operations (runtime-fusion engines). Plans come from cuDNN's heuristics
// (cudnn_graph.cpp), filtered for determinism (backward) and, under --precision fp32, for no
// tensor-core (TF32) engines. Each plan is run once on scratch buffers at plan time before it
// is accepted (the next candidate when it fails); with --conv-autotune the top candidates are
// timed there. Plans are cached per shape in the context: ResNet-50 has 53
// convolutions but far fewer distinct shapes, and each is planned once.
#include <sstream>

#include "backend/cuda/conv_plan.h"
#include "backend/cuda/cudnn_graph.h"

namespace dlperf::cuda {

std::string ConvShape::key() const {
  std::ostringstream os;
  os << to_string(dtype) << (nhwc ? " nhwc " : " nchw ") << '(' << n << ',' << c << ',' << h << ',' << w << ")*(" << k << ',' << c
     << ',' << r << ',' << r << ")/" << stride << " p" << pad;
  return os.str();
}

const char* dir_name(ConvDir d) {
  switch (d) {
    case ConvDir::fwd: return "fwd";
    case ConvDir::bwd_data: return "bwd_data";
    case ConvDir::bwd_filter: return "bwd_filter";
  }
  return "?";
}

namespace {

constexpr int kAutotuneCandidates = 8;
enum : int64_t { kX = 1, kW = 2, kY = 3, kBias = 4, kConvOut = 5, kBiased = 6 };

std::vector<int64_t> x_dims(const ConvShape& s) { return {s.n, s.c, s.h, s.w}; }
std::vector<int64_t> y_dims(const ConvShape& s) { return {s.n, s.k, s.ho, s.wo}; }
std::vector<int64_t> w_dims(const ConvShape& s) { return {s.k, s.c, s.r, s.r}; }

BackendDesc conv_desc(const ConvShape& s) {
  BackendDesc d(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  d.set_type(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_DATA_FLOAT)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_i64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2)
      .set_i64(CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1})
      .set_i64(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {s.stride, s.stride})
      .set_i64(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {s.pad, s.pad})
      .set_i64(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {s.pad, s.pad});
  d.finalize();
  return d;
}

// The graph of one direction; with bias_relu (fwd only) the conv output is virtual f32 and
// feeds bias-add and ReLU pointwise operations that write y.
std::shared_ptr<Graph> build_graph(Context& ctx, const ConvShape& s, ConvDir d, bool bias_relu) {
  auto g = std::make_shared<Graph>();
  const auto& x = g->tensor(kX, s.dtype, x_dims(s), image_strides(x_dims(s), s.nhwc));
  const auto& w = g->tensor(kW, s.dtype, w_dims(s), image_strides(w_dims(s), s.nhwc));  // KRSC with NHWC data
  const bool virt = bias_relu;
  const auto& conv_out = bias_relu ? g->tensor(kConvOut, CUDNN_DATA_FLOAT, y_dims(s), image_strides(y_dims(s), s.nhwc), virt)
                                   : g->tensor(kY, s.dtype, y_dims(s), image_strides(y_dims(s), s.nhwc));
  const auto& conv = g->keep(conv_desc(s));
  const float alpha = 1.0f, beta = 0.0f;
  if (d == ConvDir::fwd) {
    BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, alpha)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, beta);
    op.finalize();
    g->add(std::move(op));
  } else if (d == ConvDir::bwd_data) {
    BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, conv_out)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, alpha)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, beta);
    op.finalize();
    g->add(std::move(op));
  } else {
    BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, conv_out)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, alpha)
        .set_f32(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, beta);
    op.finalize();
    g->add(std::move(op));
  }
  if (bias_relu) {
    // bias (1, K, 1, 1) in the compute dtype, broadcast over N, H, W; strides in the graph's
    // layout ({K, 1, K, K} for NHWC, as cudnn-frontend's generateStrides and PyTorch's fused
    // conv-bias-ReLU give it): runtime-fusion engines infer the layout from the strides.
    const auto& bias = g->tensor(kBias, s.dtype, {1, s.k, 1, 1}, image_strides({1, s.k, 1, 1}, s.nhwc));
    const auto& biased = g->tensor(kBiased, CUDNN_DATA_FLOAT, y_dims(s), image_strides(y_dims(s), s.nhwc), true);
    const auto& y = g->tensor(kY, s.dtype, y_dims(s), image_strides(y_dims(s), s.nhwc));
    auto pointwise = [&](cudnnPointwiseMode_t mode) -> const BackendDesc& {
      BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
      pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT);
      pw.finalize();
      return g->keep(std::move(pw));
    };
    BackendDesc add(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    add.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pointwise(CUDNN_POINTWISE_ADD))
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, conv_out)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bias)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, biased);
    add.finalize();
    g->add(std::move(add));
    BackendDesc relu(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    relu.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pointwise(CUDNN_POINTWISE_RELU_FWD))
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, biased)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    relu.finalize();
    g->add(std::move(relu));
  }
  g->finalize(ctx.cudnn);
  return g;
}

// Scratch operands for timing candidates at plan time, filled with uniform noise (timing on
// zeros can flatter a kernel).
struct TimingBuffers {
  TimingBuffers(Context& ctx, const ConvShape& s) {
    const size_t e = dtype_size(s.dtype);
    const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * s.r * s.r, ny = s.n * s.k * s.ho * s.wo;
    x = ctx.alloc(static_cast<size_t>(nx) * e);
    w = ctx.alloc(static_cast<size_t>(nw) * e);
    y = ctx.alloc(static_cast<size_t>(ny) * e);
    bias = ctx.alloc(static_cast<size_t>(s.k) * e);
    DLPERF_CHECK(launch_fill_uniform(x.get(), elem(s.dtype), nx, 1, ctx.s()));
    DLPERF_CHECK(launch_fill_uniform(w.get(), elem(s.dtype), nw, 2, ctx.s()));
    DLPERF_CHECK(launch_fill_uniform(y.get(), elem(s.dtype), ny, 3, ctx.s()));
    DLPERF_CHECK(launch_fill_uniform(bias.get(), elem(s.dtype), s.k, 4, ctx.s()));
  }
  DeviceMemory x, w, y, bias;
};

std::vector<std::pair<int64_t, void*>> bindings(ConvDir d, const void* a, const void* b, void* out) {
  auto p = [](const void* v) { return const_cast<void*>(v); };
  switch (d) {
    case ConvDir::fwd: return {{kX, p(a)}, {kW, p(b)}, {kY, out}};
    case ConvDir::bwd_data: return {{kY, p(a)}, {kW, p(b)}, {kX, out}};
    case ConvDir::bwd_filter: return {{kX, p(a)}, {kY, p(b)}, {kW, out}};
  }
  return {};
}

// Plans the graph of (shape, direction, fused) once per context; later ops of the same shape
// share the plan (each keeps its own variant pack).
std::shared_ptr<const GraphPlan> cached_plan(Context& ctx, const ConvShape& s, ConvDir d, bool bias_relu) {
  const std::string key = s.key() + ' ' + dir_name(d) + (bias_relu ? " +bias+relu" : "") + (ctx.conv_autotune ? " tuned" : "") +
                          (needs_determinism(ctx, d) ? " deterministic" : "");
  if (auto it = ctx.graph_plans.find(key); it != ctx.graph_plans.end()) {
    if (!it->second) throw Error(ErrorKind::library, ctx.graph_failures[key]);
    return it->second;
  }
  try {
    auto g = build_graph(ctx, s, d, bias_relu);
    PlanPolicy policy;
    policy.deterministic = needs_determinism(ctx, d);
    policy.f32_data = s.dtype == DType::f32;
    policy.allow_tensor_core_f32 = ctx.tf32();
    policy.want_tensor_cores = s.dtype != DType::f32 || ctx.tf32();
    policy.autotune_candidates = ctx.conv_autotune ? kAutotuneCandidates : 0;
    // Every plan is executed once on scratch operands before it is accepted (a finalized plan can
    // still fail to run), and timed there under --conv-autotune. The buffers live for the
    // planning of this shape only.
    auto buffers = std::make_shared<TimingBuffers>(ctx, s);
    std::function<void(GraphPlan&)> run = [&ctx, d, bias_relu, buffers](GraphPlan& p) {
      VariantPackCache cache;
      TimingBuffers& t = *buffers;
      auto data = d == ConvDir::fwd ? bindings(d, t.x.get(), t.w.get(), t.y.get())
                  : d == ConvDir::bwd_data ? bindings(d, t.y.get(), t.w.get(), t.x.get())
                                           : bindings(d, t.x.get(), t.y.get(), t.w.get());
      if (bias_relu) data.emplace_back(kBias, t.bias.get());
      p.execute(ctx, cache, data);
    };
    auto plan = std::make_shared<const GraphPlan>(plan_graph(ctx, std::move(g), policy, run));
    ctx.sync();  // the trial and timing runs finish before their buffers go
    ctx.graph_plans[key] = plan;
    return plan;
  } catch (const Error& e) {
    ctx.graph_plans[key] = nullptr;
    ctx.graph_failures[key] = e.what();
    throw;
  }
}

class GraphConv final : public ConvRunner {
 public:
  GraphConv(Context& ctx, const ConvShape& s, ConvDir d) : dir_(d), plan_(cached_plan(ctx, s, d, false)) {}
  std::string name() const override { return "cudnn_graph " + plan_->name(); }
  MathUnits units() const override { return plan_->units(); }
  size_t workspace() const override { return plan_->workspace(); }
  void run(Context& ctx, const void* a, const void* b, void* out) override { plan_->execute(ctx, cache_, bindings(dir_, a, b, out)); }

 private:
  ConvDir dir_;
  std::shared_ptr<const GraphPlan> plan_;
  VariantPackCache cache_;
};

}  // namespace

std::unique_ptr<ConvRunner> make_graph_conv(Context& ctx, const ConvShape& s, ConvDir d) { return std::make_unique<GraphConv>(ctx, s, d); }

ConvBiasRelu::ConvBiasRelu(Context& ctx, const ConvShape& s) : plan_(cached_plan(ctx, s, ConvDir::fwd, true)) {}
std::string ConvBiasRelu::name() const { return "cudnn_graph conv+bias+relu " + plan_->name(); }
MathUnits ConvBiasRelu::units() const { return plan_->units(); }
size_t ConvBiasRelu::workspace() const { return plan_->workspace(); }
void ConvBiasRelu::run(Context& ctx, const void* x, const void* w, const void* bias, void* y) {
  plan_->execute(ctx, cache_, {{kX, const_cast<void*>(x)}, {kW, const_cast<void*>(w)}, {kBias, const_cast<void*>(bias)}, {kY, y}});
}

}  // namespace dlperf::cuda
