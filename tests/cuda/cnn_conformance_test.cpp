// The convolutional networks' ops on the CUDA backend against the CPU (oneDNN) backend in f32,
// on the paths the models run: channels-last in fp32, tf32, fp16 and bf16 (the CUDA backend's
// image layout), and NCHW f32 (the legacy paths). Inputs and parameters are exactly
// representable in f16 and bf16; tolerances are relative L2 errors per precision
// (conformance_util.h). Covered: convolution forward / backward data / backward weights with
// and without bias, the fused conv + bias + ReLU, a first layer without input gradient; batch
// norm plain, with ReLU, and with the fused residual add and ReLU (cuDNN's f16 NHWC kernels,
// dlperf's NHWC kernels for f32/bf16 and for f16 with C % 4 != 0, cuDNN + add kernel in NCHW),
// with running statistics; max / average / global average pooling; linear with the cuBLASLt
// bias and bias-gradient epilogues; cross-entropy; SGD with a device-side gradient factor.
// On an sm_90 GPU (H100, H200) no model op may have fallen back from its fast path.
#include <algorithm>

#include <iostream>
#include <random>
#include <utility>

#include "conformance_util.h"

namespace dlperf {
namespace {

using namespace cuda_test;

constexpr Precision kPrecisions[] = {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16};

struct Case {
  Precision precision;
  Layout layout;
};
std::vector<Case> cases() {
  std::vector<Case> c{{Precision::fp32, Layout::canonical}};
  for (Precision p : kPrecisions) c.push_back({p, Layout::channels_last});
  return c;
}
std::string label(const Case& c) { return std::string(name(c.precision)) + (c.layout == Layout::channels_last ? " nhwc" : " nchw"); }

class CnnConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    DLPERF_NEED_GPU();
    cpu = make_backend(BackendKind::cpu, {});
  }
  std::unique_ptr<Backend> gpu(Precision p, BackendOptions::BatchNormImpl bn = BackendOptions::BatchNormImpl::automatic) {
    BackendOptions o;
    o.precision = p;
    o.cuda_batch_norm = bn;
    return make_backend(BackendKind::cuda, o);
  }
  std::unique_ptr<Backend> cpu;
};

// y, dx, dw, db of one convolution on a backend.
struct ConvResult {
  std::vector<float> y, dx, dw, db;
};
ConvResult run_conv(Backend& be, DType t, Layout layout, const Conv2dSpec& spec, const Dims& xd) {
  auto x = input(be, xd, t, layout, randoms(static_cast<size_t>(product(xd)), 1));
  auto op = be.conv2d(spec, *x);
  auto keep = bind(be, *op, 5);
  auto y = op->make_output();
  op->forward(*x, *y);
  auto dy = be.tensor_like(*y);
  be.convert(*input(be, y->dims(), DType::f32, Layout::canonical, randoms(static_cast<size_t>(y->numel()), 9)), *dy);
  auto dx = be.tensor_like(*x);
  op->backward(*x, *dy, spec.input_grad ? dx.get() : nullptr);
  be.synchronize();
  ConvResult r{read(*y), spec.input_grad ? read(*dx) : std::vector<float>{}, grad(*op, 0), {}};
  if (spec.bias) r.db = grad(*op, 1);
  return r;
}

TEST_F(CnnConformance, Convolution) {
  const Dims xd{2, 8, 9, 9};
  const Conv2dSpec specs[] = {
      {"c3", 8, 16, 3, 1, 1, true, true, false},   // VGG-like 3x3 with bias
      {"c3relu", 8, 16, 3, 1, 1, true, true, true},  // VGG's fused conv + bias + ReLU
      {"c1s2", 8, 32, 1, 2, 0, false, true, false},  // ResNet's downsample
      {"c7", 8, 16, 7, 2, 3, false, false, false},   // a stem: no input gradient planned
  };
  for (const Case& c : cases()) {
    auto g = gpu(c.precision);
    for (const Conv2dSpec& s : specs) {
      SCOPED_TRACE(label(c) + " " + s.name);
      const ConvResult want = run_conv(*cpu, DType::f32, Layout::canonical, s, xd);
      const ConvResult got = run_conv(*g, g->dtype(), c.layout, s, xd);
      const double tol = tolerance(c.precision);
      expect_rel(want.y, got.y, tol, "y");
      expect_rel(want.dx, got.dx, tol, "dx");
      expect_rel(want.dw, got.dw, tol, "dw");
      expect_rel(want.db, got.db, tol, "db");
    }
  }
}

// The 3-channel stems (ResNet's 7x7 / 2, VGG's fused 3x3 + bias + ReLU): channels-last f16,
// bf16 and tf32 run them padded to 4 channels (conv2d.cpp), the filter gradient cropped back.
TEST_F(CnnConformance, ThreeChannelStemPaddedToFour) {
  const Dims xd{2, 3, 16, 16};
  const Conv2dSpec specs[] = {{"stem7", 3, 16, 7, 2, 3, false, false, false}, {"stem3relu", 3, 16, 3, 1, 1, true, false, true}};
  for (const Case& c : cases()) {
    auto g = gpu(c.precision);
    for (const Conv2dSpec& s : specs) {
      SCOPED_TRACE(label(c) + " " + s.name);
      const ConvResult want = run_conv(*cpu, DType::f32, Layout::canonical, s, xd);
      const ConvResult got = run_conv(*g, g->dtype(), c.layout, s, xd);
      const double tol = tolerance(c.precision);
      expect_rel(want.y, got.y, tol, "y");
      expect_rel(want.dw, got.dw, tol, "dw");
      expect_rel(want.db, got.db, tol, "db");
    }
  }
}

// y, dx, dz, dgamma, dbeta, running mean | var of one batch norm.
std::vector<std::vector<float>> run_bn(Backend& be, DType t, Layout layout, int64_t channels, int64_t hw, bool relu, bool residual) {
  const Dims xd{4, channels, hw, hw};
  auto x = input(be, xd, t, layout, randoms(static_cast<size_t>(product(xd)), 2, 2.0f));
  auto z = input(be, xd, t, layout, randoms(static_cast<size_t>(product(xd)), 3));
  auto op = be.batch_norm({"bn", channels, 1e-5f, 0.1f, relu, residual ? z.get() : nullptr}, *x);
  auto keep = bind(be, *op, 4);
  auto y = op->make_output();
  if (residual) op->forward_add(*x, *z, *y);
  else op->forward(*x, *y);
  auto dy = be.tensor_like(*y);
  be.convert(*input(be, xd, DType::f32, Layout::canonical, randoms(static_cast<size_t>(y->numel()), 6)), *dy);
  auto dx = be.tensor_like(*x);
  auto dz = be.tensor_like(*z);
  if (residual) op->backward_add(*x, *dy, *dx, *dz);
  else op->backward(*x, *dy, *dx);
  be.synchronize();
  std::vector<float> m(static_cast<size_t>(channels)), v(static_cast<size_t>(channels));
  op->read_running_stats(m, v);
  m.insert(m.end(), v.begin(), v.end());
  return {read(*y), read(*dx), residual ? read(*dz) : std::vector<float>{}, grad(*op, 0), grad(*op, 1), m};
}

TEST_F(CnnConformance, BatchNormReluAndResidual) {
  const char* names[] = {"y", "dx", "dz", "dgamma", "dbeta", "running stats"};
  using Impl = BackendOptions::BatchNormImpl;
  for (const Case& c : cases()) {
    for (Impl impl : {Impl::cudnn, Impl::kernels}) {
      if (c.layout != Layout::channels_last && impl == Impl::kernels) continue;  // NCHW has one path
      auto g = gpu(c.precision, impl);
      // C = 6: not a multiple of 4, off cuDNN's persistent kernels and batch_norm.cu's 16-byte
      // packs; C = 256 at 32 x 32: several tiles of packs (f32) and row blocks long enough for
      // the reductions' four-rows-in-flight loop. Channels-last runs both paths, each forced
      // (cuDNN's where it accepts the data type: the planned name says which ran).
      for (auto [channels, hw] : {std::pair<int64_t, int64_t>{8, 6}, {6, 6}, {256, 32}})
        for (int mode = 0; mode < 3; ++mode) {
          const bool relu = mode > 0, residual = mode == 2;
          SCOPED_TRACE(label(c) + (impl == Impl::cudnn ? " cudnn" : " kernels") + " C=" + std::to_string(channels) + " " +
                       std::to_string(hw) + "x" + std::to_string(hw) + (residual ? " bn+add+relu" : relu ? " bn+relu" : " bn"));
          const auto want = run_bn(*cpu, DType::f32, Layout::canonical, channels, hw, relu, residual);
          const auto got = run_bn(*g, g->dtype(), c.layout, channels, hw, relu, residual);
          // batch statistics of rounded data and the 1/std scaling loosen the low-precision bounds
          const double tol = 2 * tolerance(c.precision) + 1e-5;
          for (size_t i = 0; i < want.size(); ++i) expect_rel(want[i], got[i], tol, names[i]);
        }
    }
  }
}

// Channels-last max pooling runs pooling.cu's kernels: the place of each maximum kept by
// forward, dx gathered from it. Inputs are small integers (exact in every precision, and many
// ties: the first maximum of a window in row-major order takes the gradient, as in oneDNN and
// PyTorch); VGG's 2x2 / 2 over an odd size (the last row and column in no window: zero
// gradient) with C = 12 (f16 / bf16 one channel a thread, f32 packs of 4), and ResNet's 3x3 / 2
// padded 1 (overlapping windows, up to four sum into one dx) with C = 16 (16-byte packs).
TEST_F(CnnConformance, MaxPoolChannelsLast) {
  struct Shape {
    Dims x;
    Pool2dSpec spec;
  };
  const Shape shapes[] = {{{3, 12, 9, 9}, {PoolKind::max, 2, 2, 0}}, {{2, 16, 11, 11}, {PoolKind::max, 3, 2, 1}}};
  for (Precision p : kPrecisions) {
    auto g = gpu(p);
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(std::string(name(p)) + " k" + std::to_string(sh.spec.kernel));
      std::vector<float> xv(static_cast<size_t>(product(sh.x)));
      std::mt19937 rng(5);
      std::uniform_int_distribution<int> u(-3, 3);
      for (float& v : xv) v = static_cast<float>(u(rng));
      std::vector<float> y[2], dx[2];
      for (int k = 0; k < 2; ++k) {
        Backend& be = k == 0 ? *cpu : *g;
        auto x = input(be, sh.x, k == 0 ? DType::f32 : g->dtype(), k == 0 ? Layout::canonical : Layout::channels_last, xv);
        auto pool = be.pool2d(sh.spec, *x);
        auto out = pool->make_output();
        pool->forward(*x, *out);
        auto dy = be.tensor_like(*out);
        be.convert(*input(be, out->dims(), DType::f32, Layout::canonical, randoms(static_cast<size_t>(out->numel()), 31)), *dy);
        auto d = be.tensor_like(*x);
        pool->backward(*dy, *d);
        be.synchronize();
        y[k] = read(*out);
        dx[k] = read(*d);
      }
      EXPECT_EQ(y[0], y[1]) << "max pool y: integers are exact in every precision";
      expect_rel(dx[0], dx[1], tolerance(p) + 1e-6, "max pool dx");
      const int64_t h = sh.x[2];
      if (sh.spec.kernel == 2) {  // 9 = 4 windows of 2 + row 8 and column 8, in none
        for (size_t i = 0; i < dx[1].size(); ++i) {
          const auto j = static_cast<int64_t>(i);
          if ((j / h) % h == h - 1 || j % h == h - 1) {
            ASSERT_EQ(dx[1][i], 0.0f) << i;
          }
        }
      }
    }
  }
}

TEST_F(CnnConformance, PoolingLinearCrossEntropyAndSgd) {
  const Dims xd{4, 8, 7, 7};
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    auto g = gpu(c.precision);
    std::vector<std::vector<float>> out[2];
    float loss[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      Backend& be = k == 0 ? *cpu : *g;
      const DType t = k == 0 ? DType::f32 : g->dtype();
      auto x = input(be, xd, t, k == 0 ? Layout::canonical : c.layout, randoms(static_cast<size_t>(product(xd)), 7));
      auto maxp = be.pool2d({PoolKind::max, 3, 2, 1}, *x);
      auto p = maxp->make_output();
      maxp->forward(*x, *p);
      auto avgp = be.pool2d({PoolKind::avg, 2, 2, 0}, *p);
      auto q = avgp->make_output();
      avgp->forward(*p, *q);
      auto gap = be.global_avg_pool(*q);
      auto f = gap->make_output();  // (N, C)
      gap->forward(*q, *f);
      auto fc = be.linear({"fc", 8, 10, true}, *f);
      auto keep = bind(be, *fc, 8);
      auto logits = fc->make_output();
      fc->forward(*f, *logits);
      auto labels = be.tensor({4}, DType::s32);
      labels->write_indices(std::vector<int32_t>{1, 9, 0, 4});
      auto xent = be.cross_entropy({10, 0.1f, -1}, *logits);
      xent->forward(*logits, *labels);
      loss[k] = xent->loss();
      auto dlogits = be.tensor_like(*logits);
      xent->backward(*dlogits, 4.0f);
      auto df = be.tensor_like(*f);
      fc->backward(*f, *dlogits, df.get());
      auto dq = be.tensor_like(*q);
      gap->backward(*df, *dq);
      auto dp = be.tensor_like(*p);
      avgp->backward(*dq, *dp);
      auto dx = be.tensor_like(*x);
      maxp->backward(*dp, *dx);
      be.synchronize();
      out[k] = {read(*p), read(*q), read(*f), read(*logits), read(*dlogits), read(*df), grad(*fc, 0), grad(*fc, 1), read(*dx)};
    }
    const char* names[] = {"max pool", "avg pool", "global avg pool", "linear y", "xent dlogits", "linear dx", "linear dw", "linear db",
                           "max pool dx"};
    const double tol = 2 * tolerance(c.precision) + 1e-5;
    EXPECT_NEAR(loss[0], loss[1], tol * (1.0 + std::fabs(loss[0])));
    for (size_t i = 0; i < out[0].size(); ++i) expect_rel(out[0][i], out[1][i], tol, names[i]);
  }
  // SGD through the step gate in the backend's memory (global-norm clipping's path: the gate's
  // gradient factor holds 1/world x the clipping coefficient).
  const size_t n = 1000;
  const auto w0 = randoms(n, 21), g0 = randoms(n, 22), m0 = randoms(n, 23);
  std::vector<float> w[2];
  auto g = gpu(Precision::fp32);
  for (int k = 0; k < 2; ++k) {
    Backend& be = k == 0 ? *cpu : *g;
    auto wb = be.buffer(n), gb = be.buffer(n), mb = be.buffer(n);
    wb->write(w0);
    gb->write(g0);
    mb->write(m0);
    auto gate = be.buffer(kGateFloats);
    std::vector<float> init(kGateFloats, 0.0f);
    init[gate_index(GateField::loss_scale)] = 1.0f;
    init[gate_index(GateField::lr)] = 1.0f;
    gate->write(init);
    be.update_step_gate({gb->data(), n}, gate->data(), StepGateUpdate{false, 2000, 1.0f, 0.5f});  // ||g|| * 0.5 > 1: clips
    be.sgd_step({wb->data(), n}, {gb->data(), n}, {mb->data(), n}, {0.1f, 0.9f, 1e-4f, 1.0f, false, gate->data()});
    be.synchronize();
    w[k].resize(n);
    wb->read(w[k]);
  }
  expect_rel(w[0], w[1], 1e-6, "sgd w with clipping factor");
}

// The models' ops on an H100 / H200 take their fast paths: graph-API convolutions (or the
// fused conv + bias + ReLU), cuDNN's or dlperf's fused batch norms, cuBLASLt epilogues. A
// fallback is allowed to run elsewhere (it warns), but on the GPUs the benchmark targets it is
// a regression to look at, and on any sm_80+ GPU a convolution without tensor cores under
// tf32/bf16/fp16 (a "reference" kernel in planned_kernels()) is one. The planned kernels are
// printed either way.
TEST_F(CnnConformance, FastPathsOnHopper) {
  int dev = 0;
  cudaDeviceProp props{};
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&props, dev), cudaSuccess);
  for (Precision p : kPrecisions) {
    auto g = gpu(p);
    const Dims xd{8, 64, 28, 28};
    auto x = input(*g, xd, g->dtype(), Layout::channels_last, randoms(static_cast<size_t>(product(xd)), 1));
    auto conv = g->conv2d({"conv", 64, 64, 3, 1, 1, true, true, true}, *x);
    auto y = conv->make_output();
    auto bn = g->batch_norm({"bn", 64, 1e-5f, 0.1f, true, x.get()}, *y);
    // the 3-channel stem (ResNet's conv1), run on 4 channels under fp16 / bf16 / tf32
    const Dims sd{8, 3, 64, 64};
    auto xs = input(*g, sd, g->dtype(), Layout::channels_last, randoms(static_cast<size_t>(product(sd)), 2));
    auto stem = g->conv2d({"stem", 3, 64, 7, 2, 3, false, false}, *xs);
    const std::string sm = "sm_" + std::to_string(props.major * 10 + props.minor);
    EXPECT_EQ(g->isa(), sm);
    EXPECT_EQ(g->image_layout(), Layout::channels_last);
    for (const auto& k : g->planned_kernels()) {
      std::cout << "  [" << name(p) << "] " << k.op << " " << k.pass << " " << k.shape << ": " << k.impl << (k.reference ? " <- REFERENCE" : "")
                << "\n";
      if (props.major == 9) {
        EXPECT_EQ(k.impl.find("(fallback)"), std::string::npos) << name(p) << " " << k.op << " " << k.pass << " fell back: " << k.impl;
      }
      // sm_80 and later have tensor cores for TF32, bf16 and f16: no convolution may run without them.
      if (props.major >= 8) {
        EXPECT_FALSE(k.reference) << name(p) << " " << k.op << " " << k.pass << " without tensor cores: " << k.impl;
      }
      if (p == Precision::fp32) {
        EXPECT_EQ(k.impl.find("[tensor cores]"), std::string::npos) << "fp32 is IEEE f32: " << k.impl;
      }
    }
  }
}

}  // namespace
}  // namespace dlperf
