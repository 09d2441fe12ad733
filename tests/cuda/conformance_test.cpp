// Cross-backend conformance: every CUDA op is run beside the CPU (oneDNN) reference on small
// shapes with the same inputs and parameters, and outputs and gradients are compared with
// per-op tolerances (cuDNN may use TF32 for f32 convolutions, as PyTorch does). Ops the CPU
// backend does not offer are checked against plain host formulas. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "gpu_presence.h"

namespace dlperf {
namespace {

using cuda_test::have_gpu;

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

std::vector<float> read(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.read(v);
  return v;
}

void expect_close(const std::vector<float>& want, const std::vector<float>& got, float tol, const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(want[i] - got[i]) <= tol * (1.0f + std::fabs(want[i])))) ++bad;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " elements differ by more than " << tol;
}

// Binds a layer's parameters to fresh buffers and fills them with the same values on both backends.
struct Bound {
  std::unique_ptr<Buffer> values, grads;
};
Bound bind(Backend& be, Layer& l, uint32_t seed) {
  size_t total = 0;
  for (const auto& p : l.params()) total += (p.storage_elems + 15) / 16 * 16;
  Bound b{be.buffer(std::max<size_t>(total, 1)), be.buffer(std::max<size_t>(total, 1))};
  std::vector<ParamSlot> slots;
  size_t off = 0;
  for (const auto& p : l.params()) {
    slots.push_back({b.values->data() + off, b.grads->data() + off});
    off += (p.storage_elems + 15) / 16 * 16;  // 64-byte aligned, as the ParamStore lays them out (cuBLASLt's bias needs it)
  }
  l.bind(slots);
  for (size_t i = 0; i < l.params().size(); ++i) l.write_param(i, randoms(static_cast<size_t>(product(l.params()[i].dims)), seed + 17 * i, 0.5f));
  l.refresh_compute_weights();
  return b;
}

std::vector<float> grad(const Layer& l, size_t i) {
  std::vector<float> v(static_cast<size_t>(product(l.params()[i].dims)));
  l.read_grad(i, v);
  return v;
}

class CudaConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    cpu = make_backend(BackendKind::cpu, {});
    gpu = make_backend(BackendKind::cuda, {});
  }
  std::unique_ptr<Backend> cpu, gpu;
};

TEST_F(CudaConformance, Conv2dForwardBackward) {
  for (bool bias : {false, true}) {
    const Dims xd{2, 3, 9, 9};
    const Conv2dSpec spec{"c", 3, 4, 3, 2, 1, bias};
    const auto xv = randoms(static_cast<size_t>(product(xd)), 1);
    std::vector<float> want_y, got_y, want_dx, got_dx, want_dw, got_dw;
    for (Backend* be : {cpu.get(), gpu.get()}) {
      auto x = be->tensor(xd, DType::f32);
      x->write(xv);
      auto op = be->conv2d(spec, *x);
      auto keep = bind(*be, *op, 5);
      auto y = op->make_output();
      op->forward(*x, *y);
      auto dy = be->tensor_like(*y);
      dy->write(randoms(static_cast<size_t>(y->numel()), 9));
      auto dx = be->tensor_like(*x);
      op->backward(*x, *dy, dx.get());
      be->synchronize();
      (be == cpu.get() ? want_y : got_y) = read(*y);
      (be == cpu.get() ? want_dx : got_dx) = read(*dx);
      (be == cpu.get() ? want_dw : got_dw) = grad(*op, 0);
    }
    expect_close(want_y, got_y, 1e-2f, "conv y");
    expect_close(want_dx, got_dx, 1e-2f, "conv dx");
    expect_close(want_dw, got_dw, 1e-2f, "conv dw");
  }
}

TEST_F(CudaConformance, BatchNormReluAndPooling) {
  const Dims xd{4, 8, 6, 6};
  const auto xv = randoms(static_cast<size_t>(product(xd)), 2);
  std::vector<float> ys[2], dxs[2], dgs[2], means[2], pooled[2], dpool[2], gap[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    auto x = be->tensor(xd, DType::f32);
    x->write(xv);
    auto bn = be->batch_norm({"bn", 8, 1e-5f, 0.1f, true}, *x);
    auto keep = bind(*be, *bn, 3);
    auto y = bn->make_output();
    bn->forward(*x, *y);
    auto pool = be->pool2d({PoolKind::max, 3, 2, 1}, *y);
    auto p = pool->make_output();
    pool->forward(*y, *p);
    auto g = be->global_avg_pool(*p);
    auto f = g->make_output();
    g->forward(*p, *f);
    auto df = be->tensor_like(*f);
    df->write(randoms(static_cast<size_t>(f->numel()), 4));
    auto dp = be->tensor_like(*p);
    g->backward(*df, *dp);
    auto dy = be->tensor_like(*y);
    pool->backward(*dp, *dy);
    auto dx = be->tensor_like(*x);
    bn->backward(*x, *dy, *dx);
    be->synchronize();
    ys[k] = read(*y);
    pooled[k] = read(*p);
    gap[k] = read(*f);
    dpool[k] = read(*dy);
    dxs[k] = read(*dx);
    dgs[k] = grad(*bn, 0);
    std::vector<float> m(8), v(8);
    bn->read_running_stats(m, v);
    means[k] = m;
    means[k].insert(means[k].end(), v.begin(), v.end());
    ++k;
  }
  expect_close(ys[0], ys[1], 1e-4f, "bn+relu y");
  expect_close(pooled[0], pooled[1], 1e-5f, "max pool y");
  expect_close(gap[0], gap[1], 1e-5f, "global avg pool y");
  expect_close(dpool[0], dpool[1], 1e-5f, "pool backward");
  expect_close(dxs[0], dxs[1], 1e-3f, "bn dx");
  expect_close(dgs[0], dgs[1], 1e-3f, "bn dgamma");
  expect_close(means[0], means[1], 1e-4f, "bn running stats");
}

TEST_F(CudaConformance, LinearActivationAddCrossEntropy) {
  const int64_t m = 6, in = 10, out = 7;
  const auto xv = randoms(static_cast<size_t>(m * in), 7);
  const std::vector<int32_t> labels{0, 3, 6, -1, 2, 5};
  std::vector<float> outs[2][6];
  float losses[2] = {0, 0};
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    auto x = be->tensor({m, in}, DType::f32);
    x->write(xv);
    auto fc = be->linear({"fc", in, out, true}, *x);
    auto keep = bind(*be, *fc, 11);
    auto y = fc->make_output();
    fc->forward(*x, *y);
    auto act = be->activation(ActivationKind::gelu, *y);
    auto a = act->make_output();
    act->forward(*y, *a);
    auto add = be->add(*a, true);
    auto s = be->tensor_like(*a);
    add->forward(*a, *y, *s);
    auto lab = be->tensor({m}, DType::s32);
    lab->write_indices(labels);
    auto xent = be->cross_entropy({out, 0.1f, -1}, *s);
    xent->forward(*s, *lab);
    losses[k] = xent->loss();
    auto ds = be->tensor_like(*s);
    xent->backward(*ds, 2.0f);
    auto da = be->tensor_like(*a);
    add->backward_relu(*s, *ds, *da);
    auto dy = be->tensor_like(*y);
    act->backward(*y, *da, *dy);
    auto dx = be->tensor_like(*x);
    fc->backward(*x, *dy, dx.get());
    be->synchronize();
    outs[k][0] = read(*y);
    outs[k][1] = read(*s);
    outs[k][2] = read(*ds);
    outs[k][3] = read(*dx);
    outs[k][4] = grad(*fc, 0);
    outs[k][5] = grad(*fc, 1);
    ++k;
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-4f * (1.0f + std::fabs(losses[0])));
  const char* names[] = {"linear y", "gelu+add+relu", "xent dlogits", "linear dx", "linear dw", "linear db"};
  for (int i = 0; i < 6; ++i) expect_close(outs[0][i], outs[1][i], 1e-4f, names[i]);
}

TEST_F(CudaConformance, SgdStep) {
  const size_t n = 1000;
  const auto w0 = randoms(n, 21), g = randoms(n, 22), m0 = randoms(n, 23);
  std::vector<float> w[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    auto wb = be->buffer(n), gb = be->buffer(n), mb = be->buffer(n);
    wb->write(w0);
    gb->write(g);
    mb->write(m0);
    be->sgd_step({wb->data(), n}, {gb->data(), n}, {mb->data(), n}, {0.1f, 0.9f, 1e-4f, 0.5f, false});
    be->synchronize();
    w[k].resize(n);
    wb->read(w[k]);
    ++k;
  }
  expect_close(w[0], w[1], 1e-6f, "sgd w");
}

TEST_F(CudaConformance, ChannelsLastHalfConvMatchesF32) {
  // The tensor-core path: f16 NHWC convolution against the f32 CPU result, loose tolerance.
  BackendOptions half;
  half.precision = Precision::fp16;
  auto gpu16 = make_backend(BackendKind::cuda, half);
  const Dims xd{2, 8, 8, 8};
  const Conv2dSpec spec{"c", 8, 16, 3, 1, 1, true};
  const auto xv = randoms(static_cast<size_t>(product(xd)), 31);
  std::vector<float> ys[2], dws[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu16.get()}) {
    const DType t = be->dtype();
    auto x32 = be->tensor(xd, DType::f32);
    x32->write(xv);
    auto x = be->tensor(xd, t, t == DType::f32 ? Layout::canonical : Layout::channels_last);
    be->convert(*x32, *x);
    auto op = be->conv2d(spec, *x);
    auto keep = bind(*be, *op, 33);
    auto y = op->make_output();
    op->forward(*x, *y);
    auto dy = be->tensor_like(*y);
    dy->write(randoms(static_cast<size_t>(y->numel()), 35));
    op->backward(*x, *dy, nullptr);
    be->synchronize();
    ys[k] = read(*y);
    dws[k] = grad(*op, 0);
    ++k;
  }
  expect_close(ys[0], ys[1], 3e-2f, "f16 conv y");
  expect_close(dws[0], dws[1], 3e-2f, "f16 conv dw");
}

// launch_convert's index map against the host's, bit for bit, on either side of the filter
// kernel's threshold (hw < 32: a thread per element) and the plane kernel's: 1x1 and 3x3
// filters, the 7x7 stem, an activation. f32 -> f16 channels-last -> f32 canonical round-trips
// exactly (every value is a multiple of 1/4 below 512); f32 -> f32 channels-last is compared
// with the host's (n, hw, c) order, so a wrong map cannot cancel out in the round trip.
TEST(CudaConvert, LayoutMapMatchesTheHostAtEveryFilterAndImageSize) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  struct Shape { int64_t n, c, hw; };
  for (const Shape sh : {Shape{512, 2048, 1}, Shape{64, 64, 9}, Shape{64, 4, 49}, Shape{3, 5, 3136}, Shape{7, 33, 31}}) {
    const int64_t count = sh.n * sh.c * sh.hw;
    std::vector<float> canon(static_cast<size_t>(count)), want(canon.size());
    for (int64_t i = 0; i < count; ++i) {
      canon[static_cast<size_t>(i)] = static_cast<float>(i % 2039) * 0.25f - 255.0f;
      const int64_t s = i % sh.hw, ch = (i / sh.hw) % sh.c, n = i / (sh.hw * sh.c);
      want[static_cast<size_t>((n * sh.hw + s) * sh.c + ch)] = canon[static_cast<size_t>(i)];
    }
    void *a = nullptr, *b = nullptr, *h = nullptr;
    ASSERT_EQ(cudaMalloc(&a, canon.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b, canon.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&h, canon.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(a, canon.data(), canon.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    const std::string at = std::to_string(sh.n) + "x" + std::to_string(sh.c) + "x" + std::to_string(sh.hw);
    // f32 canonical -> f32 channels-last: the host's map
    ASSERT_EQ(cuda::launch_convert(a, cuda::ElemType::f32, false, b, cuda::ElemType::f32, true, sh.n, sh.c, sh.hw, nullptr), cudaSuccess);
    std::vector<float> got(canon.size());
    ASSERT_EQ(cudaMemcpy(got.data(), b, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, want) << "f32 canonical -> channels-last, " << at;
    // ... and back, and through f16 channels-last (the weight gradients' direction)
    ASSERT_EQ(cuda::launch_convert(b, cuda::ElemType::f32, true, a, cuda::ElemType::f32, false, sh.n, sh.c, sh.hw, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), a, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, canon) << "f32 channels-last -> canonical, " << at;
    ASSERT_EQ(cuda::launch_convert(a, cuda::ElemType::f32, false, h, cuda::ElemType::f16, true, sh.n, sh.c, sh.hw, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemset(a, 0, canon.size() * 4), cudaSuccess);
    ASSERT_EQ(cuda::launch_convert(h, cuda::ElemType::f16, true, a, cuda::ElemType::f32, false, sh.n, sh.c, sh.hw, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), a, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, canon) << "f32 -> f16 channels-last -> f32 canonical, " << at;
    cudaFree(a);
    cudaFree(b);
    cudaFree(h);
  }
}

}  // namespace
}  // namespace dlperf
