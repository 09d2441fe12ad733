// The three directions of a cuDNN convolution as interchangeable runners: one on cuDNN's graph
// (backend) API (conv_graph.cpp), the preferred path, and one on the legacy API
// (conv_legacy.cpp), the fallback where the graph API finds no plan on this GPU / cuDNN. The
// convolution op (conv2d.cpp) picks per direction and records which ran.
//
//   fwd:         x (N, C, H, W)  (x) w (K, C, R, R)  -> y (N, K, Ho, Wo)
//   bwd_data:    dy (N, K, Ho, Wo), w                -> dx (N, C, H, W)
//   bwd_filter:  x, dy                               -> dw (K, C, R, R)
// Activations NCHW or NHWC (x's layout); filters KCRS, or KRSC with NHWC activations; all in
// the compute dtype, accumulation in f32.
#pragma once

#include <memory>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/cudnn_graph.h"

namespace dlperf::cuda {

struct ConvShape {
  DType dtype = DType::f32;
  bool nhwc = false;
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t k = 0, r = 1;                // filters (K, C, R, R)
  int64_t stride = 1, pad = 0;
  int64_t ho = 0, wo = 0;              // y
  std::string key() const;             // identifies the shape for the plan cache
};

enum class ConvDir : uint8_t { fwd, bwd_data, bwd_filter };
const char* dir_name(ConvDir d);  // "fwd", "bwd_data", "bwd_filter"

// Under --deterministic (and for library callers by default, BackendOptions) backward passes
// run on deterministic engines only: the same seed gives the same losses bit for bit. Otherwise
// the split-K / atomics wgrad and dgrad engines cuDNN ranks first on Hopper are allowed, as
// PyTorch allows them. Forward engines are deterministic.
inline bool needs_determinism(const Context& ctx, ConvDir d) { return ctx.deterministic && d != ConvDir::fwd; }

class ConvRunner {
 public:
  virtual ~ConvRunner() = default;
  virtual std::string name() const = 0;  // "cudnn_graph engine 12", "cudnn_legacy algo 1"
  virtual MathUnits units() const = 0;   // as cuDNN reports it for the chosen engine / algorithm
  virtual size_t workspace() const = 0;  // bytes of Context::workspace it needs
  // fwd: a = x, b = w, out = y;  bwd_data: a = dy, b = w, out = dx;  bwd_filter: a = x, b = dy, out = dw.
  // Overwrites out (beta = 0).
  virtual void run(Context& ctx, const void* a, const void* b, void* out) = 0;
};

// Throws Error(library) when the graph API has no qualifying plan for this shape here.
std::unique_ptr<ConvRunner> make_graph_conv(Context& ctx, const ConvShape& s, ConvDir d);
// VGG's forward in one fused graph: y = relu(conv(x, w) + bias), bias (K) in the compute dtype.
// The constructor throws Error(library) when no engine fuses this shape here.
class ConvBiasRelu {
 public:
  ConvBiasRelu(Context& ctx, const ConvShape& s);
  std::string name() const;
  MathUnits units() const;
  size_t workspace() const;
  void run(Context& ctx, const void* x, const void* w, const void* bias, void* y);

 private:
  std::shared_ptr<const GraphPlan> plan_;
  VariantPackCache cache_;
};

// The legacy API (cudnnConvolution*), algorithms from cudnnGet*Algorithm_v7 under the
// precision's math type; throws Error(library) when none fits.
std::unique_ptr<ConvRunner> make_legacy_conv(Context& ctx, const ConvShape& s, ConvDir d);

}  // namespace dlperf::cuda
