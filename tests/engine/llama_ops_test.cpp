// Llama's CPU ops (RMSNorm, RoPE with Llama 3.1's scaling, SwiGLU, grouped-query causal
// attention computed blockwise, the streamed token cross-entropy): every backward against
// central finite differences (gradcheck.h), every forward against a plain double-precision
// reference written here from the formulas, bf16 forwards against f32 ones.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "gradcheck.h"
#include "../common/cpu_bf16.h"

namespace dlperf::testing {
namespace {

class LlamaOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});

  TensorPtr input(const Dims& d, uint64_t seed, DType t = DType::f32, float lo = -1.0f, float hi = 1.0f) {
    auto x = be->tensor(d, t);
    x->write(random_values(static_cast<size_t>(x->numel()), seed, lo, hi));
    return x;
  }
};

void expect_close(const std::vector<float>& a, const std::vector<double>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " element " << i;
}

TEST_F(LlamaOps, RmsNormForwardAndGradients) {
  auto x = input({5, 12}, 1, DType::f32, -2.0f, 2.0f);  // (M, C)
  auto n = be->rms_norm({"norm", 12, 1e-5f}, *x);
  OwnedParams owned;
  owned.bind(*be, *n);
  OwnedParams::randomize(*n, 3, 0.5f, 1.5f);
  auto y = n->make_output();
  n->forward(*x, *y);
  const auto xv = read_all(*x);
  std::vector<float> w(12);
  n->read_param(0, w);
  std::vector<double> ref(xv.size());
  for (int i = 0; i < 5; ++i) {
    double ss = 0;
    for (int j = 0; j < 12; ++j) ss += double(xv[i * 12 + j]) * xv[i * 12 + j];
    const double r = 1.0 / std::sqrt(ss / 12 + 1e-5);
    for (int j = 0; j < 12; ++j) ref[i * 12 + j] = xv[i * 12 + j] * r * w[j];
  }
  expect_close(read_all(*y), ref, 1e-5, "rms_norm y");
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 99);
  dy->write(r);
  n->backward(*x, *dy, *dx);
  FiniteDifference fd([&] { n->forward(*x, *y); }, *y, r, {1e-2, 2e-3, 2e-2, 60});
  fd.check_input("rms_norm dx", *x, read_all(*dx));
  fd.check_param("rms_norm dweight", *n, 0, OwnedParams::grad(*n, 0));
}

// Meta's apply_scaling, written again from the paper's description for the check.
double scaled_frequency(int i, int d, double theta, double factor, double lo, double hi, double old) {
  const double f = 1.0 / std::pow(theta, 2.0 * i / d);
  const double wavelen = 2 * std::numbers::pi / f;
  if (wavelen < old / hi) return f;
  if (wavelen > old / lo) return f / factor;
  const double s = (old / wavelen - lo) / (hi - lo);
  return (1 - s) * f / factor + s * f;
}

TEST_F(LlamaOps, RopeRotatesPairsWithLlama31FrequenciesAndGradients) {
  // B 2, T 40, 3 heads of 8; theta 10 and an original context of 32 put the 4 frequencies in all
  // three of the scaling's regimes (kept, divided by the factor, blended).
  const RopeSpec s{2, 40, 3, 8, 10.0f, 8.0f, 1.0f, 4.0f, 32};
  auto x = input({80, 24}, 5);
  auto rope = be->rope(s, *x);
  auto y = be->tensor_like(*x);
  rope->forward(*x, *y);
  const auto xv = read_all(*x);
  std::vector<double> ref(xv.size());
  int regimes[3] = {0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const double f0 = 1.0 / std::pow(10.0, 2.0 * i / 8), f = scaled_frequency(i, 8, 10.0, 8.0, 1.0, 4.0, 32.0);
    regimes[f == f0 ? 0 : std::abs(f - f0 / 8) < 1e-15 ? 1 : 2]++;
  }
  EXPECT_GT(regimes[0], 0);
  EXPECT_GT(regimes[1], 0);
  EXPECT_GT(regimes[2], 0);
  for (int r = 0; r < 80; ++r)
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 4; ++i) {
        const double a = (r % 40) * scaled_frequency(i, 8, 10.0, 8.0, 1.0, 4.0, 32.0);
        const size_t k = static_cast<size_t>(r * 24 + h * 8 + 2 * i);
        ref[k] = xv[k] * std::cos(a) - xv[k + 1] * std::sin(a);
        ref[k + 1] = xv[k] * std::sin(a) + xv[k + 1] * std::cos(a);
      }
  expect_close(read_all(*y), ref, 2e-6, "rope y");
  const auto r = random_values(xv.size(), 7);
  auto dy = be->tensor_like(*x);
  auto dx = be->tensor_like(*x);
  dy->write(r);
  rope->backward(*dy, *dx);
  FiniteDifference fd([&] { rope->forward(*x, *y); }, *y, r, {1e-2, 1e-3, 1e-2, 60});
  fd.check_input("rope dx", *x, read_all(*dx));
  rope->backward(*dy, *dy);  // in place, as the model runs it
  const auto a = read_all(*dx), b = read_all(*dy);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

TEST_F(LlamaOps, SwiGluGradients) {
  auto a = input({6, 10}, 11, DType::f32, -3.0f, 3.0f);
  auto b = input({6, 10}, 12);
  auto op = be->swiglu(*a);
  auto y = op->make_output();
  op->forward(*a, *b, *y);
  const auto av = read_all(*a), bv = read_all(*b);
  std::vector<double> ref(av.size());
  for (size_t i = 0; i < av.size(); ++i) ref[i] = av[i] / (1 + std::exp(-double(av[i]))) * bv[i];
  expect_close(read_all(*y), ref, 1e-6, "swiglu y");
  const auto r = random_values(av.size(), 13);
  auto dy = be->tensor_like(*y);
  dy->write(r);
  auto da = be->tensor_like(*a), db = be->tensor_like(*b);
  op->backward(*a, *b, *dy, *da, *db);
  FiniteDifference fd([&] { op->forward(*a, *b, *y); }, *y, r, {1e-2, 1e-3, 1e-2, 60});
  fd.check_input("swiglu da", *a, read_all(*da));
  fd.check_input("swiglu db", *b, read_all(*db));
}

// softmax(q k^T / sqrt(D) + causal mask) v in double, every (b, h) at once: the textbook form
// the blockwise kernel must equal.
std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                        const AttentionSpec& s) {
  const int64_t T = s.seq_len, H = s.heads, G = s.kv_heads, D = s.head_dim;
  std::vector<double> o(q.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> p(static_cast<size_t>(i + 1));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < D; ++c) d += double(q[((b * T + i) * H + h) * D + c]) * k[((b * T + j) * G + g) * D + c];
          p[j] = d / std::sqrt(double(D));
          mx = std::max(mx, p[j]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < D; ++c) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += p[j] / sum * v[((b * T + j) * G + g) * D + c];
          o[((b * T + i) * H + h) * D + c] = acc;
        }
      }
    }
  return o;
}

TEST_F(LlamaOps, CausalGqaAttentionMatchesTheTextbookFormAndGradients) {
  // T 150: two full 64-row blocks and a partial one; 4 query heads share 2 key/value heads.
  const AttentionSpec s{2, 150, 4, 2, 8};
  auto q = input({300, 32}, 21, DType::f32, -2.0f, 2.0f);
  auto k = input({300, 16}, 22, DType::f32, -2.0f, 2.0f);
  auto v = input({300, 16}, 23);
  auto att = be->causal_attention(s, *q);
  auto o = att->make_output();
  att->forward(*q, *k, *v, *o);
  expect_close(read_all(*o), reference_attention(read_all(*q), read_all(*k), read_all(*v), s), 2e-5, "attention o");
  const auto r = random_values(static_cast<size_t>(o->numel()), 24);
  auto dout = be->tensor_like(*o);
  dout->write(r);
  auto dq = be->tensor_like(*q), dk = be->tensor_like(*k), dv = be->tensor_like(*v);
  att->backward(*q, *k, *v, *o, *dout, *dq, *dk, *dv);
  FiniteDifference fd([&] { att->forward(*q, *k, *v, *o); }, *o, r, {1e-2, 2e-3, 2e-2, 40});
  fd.check_input("attention dq", *q, read_all(*dq));
  fd.check_input("attention dk", *k, read_all(*dk));
  fd.check_input("attention dv", *v, read_all(*dv));
  // a query never sees a later key: changing the last key and value leaves every earlier row
  const auto before = read_all(*o);
  auto kv = read_all(*k);
  for (int c = 0; c < 16; ++c) kv[static_cast<size_t>(149 * 16 + c)] += 1.0f;
  k->write(kv);
  att->forward(*q, *k, *v, *o);
  const auto after = read_all(*o);
  for (size_t i = 0; i < static_cast<size_t>(149 * 32); ++i) ASSERT_EQ(before[i], after[i]) << i;
}

TEST_F(LlamaOps, Bf16OpsFollowTheF32Ones) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  auto bf = make_backend(BackendKind::cpu, {Precision::bf16, 2, 0});
  const AttentionSpec s{1, 100, 4, 1, 16};
  const auto qv = random_values(100 * 64, 31), kv = random_values(100 * 16, 32), vv = random_values(100 * 16, 33);
  std::vector<float> out[2];
  for (int p = 0; p < 2; ++p) {
    Backend& b = p == 0 ? *be : *bf;
    const DType t = p == 0 ? DType::f32 : DType::bf16;
    auto q = b.tensor({100, 64}, t), k = b.tensor({100, 16}, t), v = b.tensor({100, 16}, t);
    q->write(qv), k->write(kv), v->write(vv);
    auto att = b.causal_attention(s, *q);
    auto o = att->make_output();
    att->forward(*q, *k, *v, *o);
    out[p] = read_all(*o);
  }
  for (size_t i = 0; i < out[0].size(); ++i) EXPECT_NEAR(out[0][i], out[1][i], 2e-2) << i;  // bf16: 8 mantissa bits
}

TEST_F(LlamaOps, TokenCrossEntropyLossAndGradient) {
  const int64_t M = 7, V = 300;
  auto logits = input({M, V}, 41, DType::f32, -4.0f, 4.0f);
  auto labels = be->tensor({M}, DType::s32);
  const std::vector<int32_t> lab{0, 299, 17, -1, 150, 17, 3};  // -1: ignored
  labels->write_indices(lab);
  auto ce = be->token_cross_entropy({V, 0.0f, -1}, *logits);
  ce->forward(*logits, *labels);
  const auto x = read_all(*logits);
  double ref = 0;
  for (int64_t i = 0; i < M; ++i) {
    if (lab[i] < 0) continue;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(x[i * V + j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(x[i * V + j] - mx);
    ref += mx + std::log(s) - x[i * V + lab[i]];
  }
  EXPECT_NEAR(ce->loss(), ref / 6, 1e-5);
  auto g = be->tensor_like(*logits);
  g->write(x);
  ce->backward(*g, LossGradScale(2.0f));  // in place over a copy of the logits
  const auto gv = read_all(*g);
  Rng pick(5);
  for (int n = 0; n < 40; ++n) {
    const size_t i = pick.next() % x.size();
    auto p = x;
    p[i] += 1e-2f;
    logits->write(p);
    ce->forward(*logits, *labels);
    const double lp = ce->loss();
    p[i] -= 2e-2f;
    logits->write(p);
    ce->forward(*logits, *labels);
    const double lm = ce->loss();
    const double numeric = 2.0 * (lp - lm) / 2e-2;
    EXPECT_NEAR(gv[i], numeric, 1e-4 + 2e-2 * std::abs(numeric)) << "dlogits " << i;
  }
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(gv[static_cast<size_t>(3 * V + j)], 0.0f);  // the ignored row
}

// A batch's loss in chunks (Llama's --logits-chunk): each chunk's op on row views, dividing by
// the batch's rows (CrossEntropySpec::mean_over). The chunks' losses add up to the whole op's,
// and their gradients are its rows: the same row kernels, only the divisor is shared.
TEST_F(LlamaOps, TokenCrossEntropyInChunksAddsUpToTheWhole) {
  const int64_t M = 12, V = 257, C = 4;
  auto logits = input({M, V}, 43, DType::f32, -4.0f, 4.0f);
  auto labels = be->tensor({M}, DType::s32);
  std::vector<int32_t> lab(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) lab[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37) % V);
  labels->write_indices(lab);
  auto whole = be->token_cross_entropy({V, 0.0f, -1}, *logits);
  whole->forward(*logits, *labels);
  auto g = be->tensor_like(*logits);
  g->write(read_all(*logits));
  whole->backward(*g, LossGradScale(3.0f));
  const auto g_whole = read_all(*g);
  g->write(read_all(*logits));
  double sum = 0;
  for (int64_t r = 0; r < M; r += C) {
    auto x = be->rows_of(*g, r, C);
    auto l = be->rows_of(*labels, r, C);
    auto part = be->token_cross_entropy({V, 0.0f, -1, M}, *x);
    part->forward(*x, *l);
    sum += part->loss();
    part->backward(*x, LossGradScale(3.0f));
  }
  EXPECT_NEAR(sum, whole->loss(), 1e-6 * whole->loss());
  const auto g_chunks = read_all(*g);
  for (size_t i = 0; i < g_whole.size(); ++i) ASSERT_EQ(g_chunks[i], g_whole[i]) << "dlogits " << i;
}

TEST_F(LlamaOps, RowViewsShareTheTensorsStorage) {
  auto x = input({6, 5}, 47);
  auto v = be->rows_of(*x, 2, 3);
  EXPECT_EQ(v->dims(), (Dims{3, 5}));
  const auto all = read_all(*x);
  const auto rows = read_all(*v);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], all[10 + i]);
  v->zero();  // through the view: rows 2..4 of x
  const auto after = read_all(*x);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], i >= 10 && i < 25 ? 0.0f : all[i]) << i;
  EXPECT_THROW((void)be->rows_of(*x, 4, 3), Error);  // past the last row
}

}  // namespace
}  // namespace dlperf::testing
