// Every op ResNet-50 and VGG16 use, backward checked against central finite differences on
// small shapes, on the CPU (oneDNN) backend. Inputs come both in the plain layout and in
// the blocked layout an upstream convolution produces, so layout handling is checked too.
#include <gtest/gtest.h>

#include "gradcheck.h"

namespace dlperf::testing {
namespace {

class CnnOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});

  // A tensor in the layout a 3x3 convolution with `c` output channels produces (blocked).
  TensorPtr blocked_input(const Dims& d, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    auto src = be->tensor({d[0], 3, d[2], d[3]}, DType::f32);
    auto conv = be->conv2d({"up", 3, d[1], 3, 1, 1}, *src);
    auto t = conv->make_output();
    t->write(random_values(static_cast<size_t>(t->numel()), seed, lo, hi));
    return t;
  }
  TensorPtr plain_input(const Dims& d, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    auto t = be->tensor(d, DType::f32);
    t->write(random_values(static_cast<size_t>(t->numel()), seed, lo, hi));
    return t;
  }
};

void check_conv(Backend& be, Tensor& x, const Conv2dSpec& spec) {
  auto conv = be.conv2d(spec, x);
  OwnedParams owned;
  owned.bind(be, *conv);
  OwnedParams::randomize(*conv, 5);
  auto y = conv->make_output();
  auto dy = be.tensor_like(*y);
  auto dx = be.tensor_like(x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 99);
  dy->write(r);
  conv->forward(x, *y);
  conv->backward(x, *dy, dx.get());
  FiniteDifference fd([&] { conv->forward(x, *y); }, *y, r);
  fd.check_input("conv dx", x, read_all(*dx));
  fd.check_param("conv dW", *conv, 0, OwnedParams::grad(*conv, 0));
  if (spec.bias) fd.check_param("conv db", *conv, 1, OwnedParams::grad(*conv, 1));
}

TEST_F(CnnOps, Conv3x3Stride1PlainInput) {
  auto x = plain_input({2, 3, 7, 7}, 1);
  check_conv(*be, *x, {"c", 3, 16, 3, 1, 1, true});
}

TEST_F(CnnOps, Conv3x3Stride2BlockedInput) {
  auto x = blocked_input({2, 16, 8, 8}, 2);
  check_conv(*be, *x, {"c", 16, 32, 3, 2, 1, false});
}

TEST_F(CnnOps, Conv1x1BlockedInput) {
  auto x = blocked_input({2, 16, 5, 5}, 3);
  check_conv(*be, *x, {"c", 16, 16, 1, 1, 0, false});
}

TEST_F(CnnOps, Conv7x7Stride2Pad3) {
  auto x = plain_input({1, 3, 12, 12}, 4);
  check_conv(*be, *x, {"c", 3, 16, 7, 2, 3, false});
}

// A filter wider than its input (ResNet's last stage at 32x32 images: a 3x3 filter over 2x2, with
// stride 2 and stride 1): on AVX2 oneDNN has no JIT backward-weights pass for it in the blocked
// layouts, so the convolution plans it in the plain layout (conv2d.cpp). Gradients by finite
// differences, and no reference kernel planned on any ISA (also run under ONEDNN_MAX_CPU_ISA=avx2:
// tests/engine/CMakeLists.txt).
TEST_F(CnnOps, Conv3x3OverA2x2InputPlansNoReferenceKernel) {
  for (int64_t stride : {2, 1}) {
    auto x = blocked_input({2, 16, 2, 2}, 5);
    check_conv(*be, *x, {"c", 16, 24, 3, stride, 1, true});
  }
  int planned = 0;
  for (const PlannedKernel& k : be->planned_kernels())
    if (k.op.rfind("c", 0) == 0) {  // the convolutions under test ("up" makes the blocked input)
      EXPECT_FALSE(k.reference) << k.op << " " << k.pass << " " << k.impl;
      planned += k.pass == "backward_weights";
    }
  EXPECT_EQ(planned, 2);
}

void check_batch_norm(Backend& be, Tensor& x, bool relu) {
  auto bn = be.batch_norm({"bn", x.dims()[1], 1e-5f, 0.1f, relu}, x);
  OwnedParams owned;
  owned.bind(be, *bn);
  OwnedParams::randomize(*bn, 7, 0.5f, 1.5f);
  auto y = bn->make_output();
  auto dy = be.tensor_like(*y);
  auto dx = be.tensor_like(x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 98);
  dy->write(r);
  bn->forward(x, *y);
  bn->backward(x, *dy, *dx);
  {  // exact: dbeta_c = sum over the channel of dy * relu'(y)
    const auto yv = read_all(*y), db = OwnedParams::grad(*bn, 1);
    const auto& d = x.dims();
    const int64_t hw = d[2] * d[3];
    for (int64_t ch = 0; ch < d[1]; ++ch) {
      double s = 0;
      for (int64_t n = 0; n < d[0]; ++n)
        for (int64_t i = 0; i < hw; ++i) {
          const size_t k = static_cast<size_t>((n * d[1] + ch) * hw + i);
          s += (!relu || yv[k] > 0) ? r[k] : 0.0;
        }
      EXPECT_NEAR(db[static_cast<size_t>(ch)], s, 1e-4) << "dbeta channel " << ch;
    }
  }
  GradCheck c;
  // Batch statistics make L curved, and a fused ReLU puts kinks in it: a small step keeps
  // both the truncation error and the chance of stepping over a kink down (the exact dbeta
  // check above covers the ReLU mask itself).
  c.eps = relu ? 2e-4 : 3e-3;
  c.atol = relu ? 1e-2 : c.atol;
  FiniteDifference fd([&] { bn->forward(x, *y); }, *y, r, c);
  fd.check_input("bn dx", x, read_all(*dx));
  fd.check_param("bn dgamma", *bn, 0, OwnedParams::grad(*bn, 0));
  fd.check_param("bn dbeta", *bn, 1, OwnedParams::grad(*bn, 1));
}

TEST_F(CnnOps, BatchNormTraining) {
  auto x = blocked_input({4, 16, 3, 3}, 5, -2.0f, 2.0f);
  check_batch_norm(*be, *x, false);
}

TEST_F(CnnOps, BatchNormFusedRelu) {
  auto x = blocked_input({4, 16, 3, 3}, 6, -2.0f, 2.0f);
  check_batch_norm(*be, *x, true);
}

TEST_F(CnnOps, BatchNormRunningStatisticsFollowPyTorch) {
  // Running mean/var after one step from (0, 1) with momentum 0.1 and the unbiased variance.
  auto x = plain_input({2, 16, 2, 2}, 8);
  auto bn = be->batch_norm({"bn", 16, 1e-5f, 0.1f, false}, *x);
  OwnedParams owned;
  owned.bind(*be, *bn);
  OwnedParams::randomize(*bn, 1);
  auto y = bn->make_output();
  bn->forward(*x, *y);
  const auto v = read_all(*x);
  std::vector<float> mean(16), var(16);
  bn->read_running_stats(mean, var);
  for (int c = 0; c < 16; ++c) {
    double s = 0, s2 = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) s += v[static_cast<size_t>((n * 16 + c) * 4 + i)];
    const double m = s / 8;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) s2 += std::pow(v[static_cast<size_t>((n * 16 + c) * 4 + i)] - m, 2);
    EXPECT_NEAR(mean[static_cast<size_t>(c)], 0.1 * m, 1e-5);
    EXPECT_NEAR(var[static_cast<size_t>(c)], 0.9 + 0.1 * s2 / 7, 1e-5);
  }
}

void check_pool(Backend& be, Tensor& x, const Pool2dSpec& spec) {
  auto pool = be.pool2d(spec, x);
  auto y = pool->make_output();
  auto dy = be.tensor_like(*y);
  auto dx = be.tensor_like(x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 97);
  dy->write(r);
  pool->forward(x, *y);
  pool->backward(*dy, *dx);
  GradCheck c;
  c.eps = 1e-3;  // max pooling: keep perturbations below the gaps between window values
  FiniteDifference fd([&] { pool->forward(x, *y); }, *y, r, c);
  fd.check_input("pool dx", x, read_all(*dx));
}

TEST_F(CnnOps, MaxPool3x3Stride2Pad1) {
  auto x = blocked_input({2, 16, 7, 7}, 9);
  check_pool(*be, *x, {PoolKind::max, 3, 2, 1});
}

TEST_F(CnnOps, AvgPool2x2) {
  auto x = blocked_input({2, 16, 6, 6}, 10);
  check_pool(*be, *x, {PoolKind::avg, 2, 2, 0});
}

TEST_F(CnnOps, GlobalAvgPool) {
  auto x = blocked_input({2, 32, 3, 3}, 11);
  auto gap = be->global_avg_pool(*x);
  auto y = gap->make_output();
  ASSERT_EQ(y->dims(), (Dims{2, 32}));
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(64, 96);
  dy->write(r);
  gap->forward(*x, *y);
  gap->backward(*dy, *dx);
  FiniteDifference fd([&] { gap->forward(*x, *y); }, *y, r);
  fd.check_input("gap dx", *x, read_all(*dx));
  // and the forward value itself: the mean over H x W
  const auto xv = read_all(*x), yv = read_all(*y);
  double s = 0;
  for (int i = 0; i < 9; ++i) s += xv[static_cast<size_t>(i)];
  EXPECT_NEAR(yv[0], s / 9, 1e-5);
}

TEST_F(CnnOps, LinearWithBias) {
  auto x = plain_input({3, 20}, 12);
  auto fc = be->linear({"fc", 20, 7, true}, *x);
  OwnedParams owned;
  owned.bind(*be, *fc);
  OwnedParams::randomize(*fc, 13);
  auto y = fc->make_output();
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(21, 95);
  dy->write(r);
  fc->forward(*x, *y);
  fc->backward(*x, *dy, dx.get());
  FiniteDifference fd([&] { fc->forward(*x, *y); }, *y, r);
  fd.check_input("fc dx", *x, read_all(*dx));
  fd.check_param("fc dW", *fc, 0, OwnedParams::grad(*fc, 0));
  fd.check_param("fc db", *fc, 1, OwnedParams::grad(*fc, 1));
}

TEST_F(CnnOps, ReluAwayFromZero) {
  auto x = blocked_input({2, 16, 3, 3}, 14, 0.1f, 1.0f);
  auto v = read_all(*x);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];  // half negative, none near 0
  x->write(v);
  auto act = be->activation(ActivationKind::relu, *x);
  auto y = act->make_output();
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 94);
  dy->write(r);
  act->forward(*x, *y);
  act->backward(*x, *dy, *dx);
  FiniteDifference fd([&] { act->forward(*x, *y); }, *y, r);
  fd.check_input("relu dx", *x, read_all(*dx));
}

TEST_F(CnnOps, GeluErf) {
  auto x = plain_input({4, 10}, 15, -3.0f, 3.0f);
  auto act = be->activation(ActivationKind::gelu, *x);
  auto y = act->make_output();
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(40, 93);
  dy->write(r);
  act->forward(*x, *y);
  act->backward(*x, *dy, *dx);
  FiniteDifference fd([&] { act->forward(*x, *y); }, *y, r);
  fd.check_input("gelu dx", *x, read_all(*dx));
  const auto xv = read_all(*x), yv = read_all(*y);
  EXPECT_NEAR(yv[0], 0.5 * xv[0] * (1 + std::erf(xv[0] / std::sqrt(2.0))), 1e-5);
}

TEST_F(CnnOps, AddWithFusedReluAndItsBackward) {
  auto a = blocked_input({2, 16, 3, 3}, 16);
  auto b = be->tensor_like(*a);
  b->write(random_values(static_cast<size_t>(a->numel()), 17));
  auto add = be->add(*a, *b, true);
  auto y = be->tensor_like(*a);
  add->forward(*a, *b, *y);
  const auto av = read_all(*a), bv = read_all(*b), yv = read_all(*y);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_FLOAT_EQ(yv[i], std::max(0.0f, av[i] + bv[i]));
  auto dy = be->tensor_like(*y);
  auto d = be->tensor_like(*y);
  const auto r = random_values(yv.size(), 92);
  dy->write(r);
  add->backward_relu(*y, *dy, *d);
  const auto dv = read_all(*d);
  for (size_t i = 0; i < dv.size(); ++i) EXPECT_FLOAT_EQ(dv[i], yv[i] > 0 ? r[i] : 0.0f);
  // y may alias a: gradient accumulation in place
  auto plain_add = be->add(*a, *b, false);
  plain_add->forward(*a, *b, *a);
  const auto acc = read_all(*a);
  for (size_t i = 0; i < acc.size(); ++i) EXPECT_FLOAT_EQ(acc[i], av[i] + bv[i]);
}

TEST_F(CnnOps, SoftmaxCrossEntropyWithLabelSmoothing) {
  const int64_t m = 5, k = 7;
  auto logits = plain_input({m, k}, 18, -2.0f, 2.0f);
  auto labels = be->tensor({m}, DType::s32);
  const std::vector<int32_t> lab = {0, 6, 3, -1, 2};  // -1: ignored row
  labels->write_indices(lab);
  auto xent = be->cross_entropy({k, 0.1f, -1}, *logits);
  xent->forward(*logits, *labels);
  // Reference loss in double.
  const auto x = read_all(*logits);
  double expect = 0;
  int counted = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (lab[static_cast<size_t>(i)] < 0) continue;
    double mx = -1e30, s = 0, sx = 0;
    for (int64_t j = 0; j < k; ++j) mx = std::max(mx, static_cast<double>(x[static_cast<size_t>(i * k + j)]));
    for (int64_t j = 0; j < k; ++j) {
      s += std::exp(x[static_cast<size_t>(i * k + j)] - mx);
      sx += x[static_cast<size_t>(i * k + j)];
    }
    const double lse = mx + std::log(s);
    expect += lse - (0.9 * x[static_cast<size_t>(i * k + lab[static_cast<size_t>(i)])] + 0.1 / k * sx);
    ++counted;
  }
  EXPECT_NEAR(xent->loss(), expect / counted, 1e-5);
  auto dlogits = be->tensor_like(*logits);
  xent->backward(*dlogits, 1.0f);
  // Finite differences of the loss itself (r = 1 on a scalar "output").
  const auto analytic = read_all(*dlogits);
  for (size_t i = 0; i < x.size(); ++i) {
    auto p = x;
    const double eps = 1e-3;
    p[i] = static_cast<float>(x[i] + eps);
    logits->write(p);
    xent->forward(*logits, *labels);
    const double lp = xent->loss();
    p[i] = static_cast<float>(x[i] - eps);
    logits->write(p);
    xent->forward(*logits, *labels);
    const double lm = xent->loss();
    EXPECT_NEAR(analytic[i], (lp - lm) / (2 * eps), 2e-4) << "element " << i;
  }
}

}  // namespace
}  // namespace dlperf::testing
