// Every op BERT uses beyond the CNN ones (layer norm, embedding, dropout, batched matmul,
// masked softmax, row gather, tied decoder, tanh), backward checked against central finite
// differences on small shapes through the canonical layout (gradcheck.h), on the CPU
// (oneDNN) backend; bf16 forwards checked against the f32 ones.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gradcheck.h"
#include "../common/cpu_bf16.h"

namespace dlperf::testing {
namespace {

class TransformerOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});

  TensorPtr input(const Dims& d, uint64_t seed, DType t = DType::f32, float lo = -1.0f, float hi = 1.0f) {
    auto x = be->tensor(d, t);
    x->write(random_values(static_cast<size_t>(x->numel()), seed, lo, hi));
    return x;
  }
  TensorPtr indices(const std::vector<int32_t>& v) {
    auto t = be->tensor({static_cast<int64_t>(v.size())}, DType::s32);
    t->write_indices(v);
    return t;
  }
};

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " element " << i;
}

TEST_F(TransformerOps, LayerNormGradients) {
  auto x = input({6, 10}, 1, DType::f32, -2.0f, 2.0f);  // (M, C)
  auto ln = be->layer_norm({"ln", 10, 1e-12f}, *x);
  OwnedParams owned;
  owned.bind(*be, *ln);
  OwnedParams::randomize(*ln, 3, 0.5f, 1.5f);
  auto y = ln->make_output();
  auto dy = be->tensor_like(*y);
  auto dx = be->tensor_like(*x);
  const auto r = random_values(static_cast<size_t>(y->numel()), 99);
  dy->write(r);
  ln->forward(*x, *y);
  ln->backward(*x, *dy, *dx);
  FiniteDifference fd([&] { ln->forward(*x, *y); }, *y, r, {1e-2, 2e-3, 2e-2, 60});
  fd.check_input("ln dx", *x, read_all(*dx));
  fd.check_param("ln dweight", *ln, 0, OwnedParams::grad(*ln, 0));
  fd.check_param("ln dbias", *ln, 1, OwnedParams::grad(*ln, 1));
  // forward: (y - bias) / weight has mean 0 and variance 1 in every row
  ln->forward(*x, *y);
  std::vector<float> w(10), b(10);
  ln->read_param(0, w), ln->read_param(1, b);
  const auto yv = read_all(*y);
  for (int i = 0; i < 6; ++i) {
    double s = 0, s2 = 0;
    for (int j = 0; j < 10; ++j) {
      const double z = (yv[i * 10 + j] - b[j]) / w[j];
      s += z, s2 += z * z;
    }
    EXPECT_NEAR(s / 10, 0.0, 1e-5);
    EXPECT_NEAR(s2 / 10, 1.0, 1e-4);
  }
}

TEST_F(TransformerOps, EmbeddingGradientsWithRepeatedIds) {
  auto ids = indices({3, 0, 3, 4, 1, 3, 0});  // (M = 7), id 3 three times, id 2 never
  auto emb = be->embedding({"emb", 5, 4}, *ids);
  OwnedParams owned;
  owned.bind(*be, *emb);
  OwnedParams::randomize(*emb, 4);
  auto y = emb->make_output();
  emb->forward(*ids, *y);
  std::vector<float> w(20);
  emb->read_param(0, w);
  const auto yv = read_all(*y);
  const int32_t id[] = {3, 0, 3, 4, 1, 3, 0};
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(yv[i * 4 + j], w[id[i] * 4 + j]);
  auto dy = be->tensor_like(*y);
  const auto r = random_values(static_cast<size_t>(y->numel()), 98);
  dy->write(r);
  emb->backward(*ids, *dy);
  const auto g = OwnedParams::grad(*emb, 0);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(g[2 * 4 + j], 0.0f) << "unused row";
  FiniteDifference fd([&] { emb->forward(*ids, *y); }, *y, r, {1e-2, 1e-4, 1e-3, 20});
  fd.check_param("embedding dW", *emb, 0, g);
}

TEST_F(TransformerOps, EmbeddingRejectsOutOfRangeIds) {
  auto ids = indices({0, 5});
  auto emb = be->embedding({"emb", 5, 4}, *ids);
  OwnedParams owned;
  owned.bind(*be, *emb);
  auto y = emb->make_output();
  try {
    emb->forward(*ids, *y);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("token id 5"), std::string::npos) << e.what();
  }
}

TEST_F(TransformerOps, DropoutMaskScaleAndDeterminism) {
  const float p = 0.25f;
  auto x = input({64, 100}, 5, DType::f32, 0.5f, 1.5f);  // no zeros: a zero output means dropped
  auto drop = be->dropout(p, *x);
  auto y = be->tensor_like(*x), y2 = be->tensor_like(*x);
  auto drop2 = be->dropout(p, *x);
  drop->forward(*x, *y, 7);
  drop2->forward(*x, *y2, 7);  // a fresh op, same seed and call count: same mask
  const auto xv = read_all(*x), yv = read_all(*y);
  EXPECT_EQ(yv, read_all(*y2));
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(yv[i], xv[i] / (1 - p));
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / 6400.0, 1.0 - p, 0.03);
  // backward applies the forward's mask and scale: dx = dy * y / x
  auto dy = input({64, 100}, 6);
  auto dx = be->tensor_like(*x);
  drop->backward(*dy, *dx);
  const auto dyv = read_all(*dy), dxv = read_all(*dx);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(dxv[i], dyv[i] * yv[i] / xv[i], 1e-6);
  // the next call draws a different mask
  drop->forward(*x, *y2, 7);
  EXPECT_NE(yv, read_all(*y2));
  // p = 0 is the identity
  auto id = be->dropout(0.0f, *x);
  id->forward(*x, *y, 1);
  EXPECT_EQ(read_all(*y), xv);
}

// c = alpha op(a) op(b) in double, for dense (batch, rows, cols) operands.
std::vector<double> reference_bmm(const BatchedMatmulSpec& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> c(static_cast<size_t>(s.batch * s.m * s.n));
  for (int64_t z = 0; z < s.batch; ++z)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          const double av = s.transpose_a ? a[(z * s.k + l) * s.m + i] : a[(z * s.m + i) * s.k + l];
          const double bv = s.transpose_b ? b[(z * s.n + j) * s.k + l] : b[(z * s.k + l) * s.n + j];
          acc += av * bv;
        }
        c[(z * s.m + i) * s.n + j] = s.alpha * acc;
      }
  return c;
}

void check_bmm(Backend& be, const BatchedMatmulSpec& s, const Dims& ad, const Dims& bd, const Dims& cd) {
  auto a = be.tensor(ad, DType::f32), b = be.tensor(bd, DType::f32), c = be.tensor(cd, DType::f32);
  a->write(random_values(static_cast<size_t>(a->numel()), 11));
  b->write(random_values(static_cast<size_t>(b->numel()), 12));
  auto mm = be.batched_matmul(s, DType::f32);
  mm->forward(*a, *b, *c);
  const auto r = random_values(static_cast<size_t>(c->numel()), 13);
  auto dc = be.tensor_like(*c), da = be.tensor_like(*a), db = be.tensor_like(*b);
  dc->write(r);
  mm->backward(*a, *b, *dc, *da, *db);
  FiniteDifference fd([&] { mm->forward(*a, *b, *c); }, *c, r, {1e-2, 1e-3, 1e-2, 30});
  fd.check_input("bmm da", *a, read_all(*da));
  fd.check_input("bmm db", *b, read_all(*db));
}

TEST_F(TransformerOps, BatchedMatmulAllTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transpose_a ") + (ta ? "1" : "0") + " transpose_b " + (tb ? "1" : "0"));
      BatchedMatmulSpec s{3, 4, 5, 6, ta, tb, 0.5f};
      Dims ad = ta ? Dims{3, 6, 4} : Dims{3, 4, 6};
      Dims bd = tb ? Dims{3, 5, 6} : Dims{3, 6, 5};
      auto a = be->tensor(ad, DType::f32), b = be->tensor(bd, DType::f32), c = be->tensor({3, 4, 5}, DType::f32);
      const auto av = random_values(72, 21), bv = random_values(90, 22);
      a->write(av), b->write(bv);
      be->batched_matmul(s, DType::f32)->forward(*a, *b, *c);
      const auto ref = reference_bmm(s, av, bv);
      const auto cv = read_all(*c);
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(cv[i], ref[i], 1e-5);
      check_bmm(*be, s, ad, bd, {3, 4, 5});
    }
}

// BERT's attention: q, k, v and the context stay (B, T, heads, d) as the linear layers write them.
TEST_F(TransformerOps, BatchedMatmulHeadInterleavedOperands) {
  const int64_t B = 2, T = 5, h = 3, d = 4;
  BatchedMatmulSpec scores{B * h, T, T, d, false, true, 0.5f, h, MatmulOperand::heads, MatmulOperand::heads, MatmulOperand::dense};
  check_bmm(*be, scores, {B * T, h * d}, {B * T, h * d}, {B, h, T, T});
  BatchedMatmulSpec context{B * h, T, d, T, false, false, 1.0f, h, MatmulOperand::dense, MatmulOperand::heads, MatmulOperand::heads};
  check_bmm(*be, context, {B, h, T, T}, {B * T, h * d}, {B * T, h * d});
  // forward against a direct index computation: q[b, t, head, :] . k[b, s, head, :]
  auto q = input({B * T, h * d}, 31), k = input({B * T, h * d}, 32);
  auto c = be->tensor({B, h, T, T}, DType::f32);
  be->batched_matmul(scores, DType::f32)->forward(*q, *k, *c);
  const auto qv = read_all(*q), kv = read_all(*k), cv = read_all(*c);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s < T; ++s) {
          double acc = 0;
          for (int64_t j = 0; j < d; ++j) acc += qv[((b * T + t) * h + hh) * d + j] * kv[((b * T + s) * h + hh) * d + j];
          EXPECT_NEAR(cv[((b * h + hh) * T + t) * T + s], 0.5 * acc, 1e-5);
        }
}

TEST_F(TransformerOps, MaskedSoftmaxGradients) {
  const int64_t B = 2, H = 2, T = 5;
  auto x = input({B, H, T, T}, 41, DType::f32, -2.0f, 2.0f);
  auto mask = be->tensor({B, T}, DType::f32);
  mask->write(std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, -10000, -10000});  // sequence 1: 3 real tokens
  auto sm = be->masked_softmax(*x);
  auto y = be->tensor_like(*x);
  sm->forward(*x, *mask, *y);
  const auto yv = read_all(*y);
  for (int64_t r = 0; r < B * H * T; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) sum += yv[r * T + j];
    EXPECT_NEAR(sum, 1.0, 1e-5);
    if (r >= H * T) {
      EXPECT_LT(yv[r * T + 4], 1e-6) << "masked key";
    }
  }
  const auto r = random_values(static_cast<size_t>(y->numel()), 42);
  auto dy = be->tensor_like(*y), dx = be->tensor_like(*x);
  dy->write(r);
  sm->backward(*y, *dy, *dx);
  FiniteDifference fd([&] { sm->forward(*x, *mask, *y); }, *y, r, {1e-2, 1e-3, 1e-2, 40});
  fd.check_input("softmax dx", *x, read_all(*dx));
}

TEST_F(TransformerOps, RowGatherGradients) {
  auto x = input({6, 4}, 51);
  auto idx = indices({5, 0, 5, 2});
  auto g = be->gather_rows(*x, *idx);
  auto y = g->make_output();
  g->forward(*x, *idx, *y);
  const auto r = random_values(16, 52);
  auto dy = be->tensor_like(*y), dx = be->tensor_like(*x);
  dy->write(r);
  g->backward(*idx, *dy, *dx);
  FiniteDifference fd([&] { g->forward(*x, *idx, *y); }, *y, r, {1e-2, 1e-4, 1e-3, 24});
  fd.check_input("gather dx", *x, read_all(*dx));
}

TEST_F(TransformerOps, TanhGradients) {
  auto x = input({3, 7}, 61, DType::f32, -2.0f, 2.0f);
  auto act = be->activation(ActivationKind::tanh, *x);
  auto y = act->make_output();
  act->forward(*x, *y);
  const auto xv = read_all(*x), yv = read_all(*y);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(yv[i], std::tanh(xv[i]), 1e-6);
  const auto r = random_values(21, 62);
  auto dy = be->tensor_like(*y), dx = be->tensor_like(*x);
  dy->write(r);
  act->backward(*x, *dy, *dx);
  FiniteDifference fd([&] { act->forward(*x, *y); }, *y, r);
  fd.check_input("tanh dx", *x, read_all(*dx));
}

// The MLM decoder shares the embedding table: L = r1 . E[ids] + r2 . (x E^T + b); the table's
// gradient must be the sum of both uses after decoder backward, then embedding backward.
TEST_F(TransformerOps, TiedDecoderGradientsSumBothUses) {
  const int64_t V = 6, C = 4;
  auto ids = indices({1, 4, 4});
  auto emb = be->embedding({"word", V, C}, *ids);
  auto x = input({3, C}, 71);
  auto dec = be->tied_linear({"dec", C, V, true}, *emb, *x);
  ASSERT_EQ(dec->params().size(), 1u);
  EXPECT_EQ(dec->params()[0].name, "dec.bias");
  OwnedParams pe, pd;
  pe.bind(*be, *emb);
  pd.bind(*be, *dec);
  OwnedParams::randomize(*emb, 72);
  OwnedParams::randomize(*dec, 73);
  auto e = emb->make_output();
  auto y = dec->make_output();
  // one output vector for the check: [E[ids] ; x E^T + b]
  auto both = be->tensor({3 * C + 3 * V}, DType::f32);
  const auto forward = [&] {
    emb->forward(*ids, *e);
    dec->forward(*x, *y);
    auto ev = read_all(*e), yv = read_all(*y);
    ev.insert(ev.end(), yv.begin(), yv.end());
    both->write(ev);
  };
  const auto r = random_values(static_cast<size_t>(both->numel()), 74);
  auto de = be->tensor_like(*e), dy = be->tensor_like(*y), dx = be->tensor_like(*x);
  de->write(std::vector<float>(r.begin(), r.begin() + 3 * C));
  dy->write(std::vector<float>(r.begin() + 3 * C, r.end()));
  forward();
  dec->backward(*x, *dy, dx.get());
  emb->backward(*ids, *de);
  FiniteDifference fd(forward, *both, r, {1e-2, 1e-3, 1e-2, 24});
  fd.check_param("tied table dE", *emb, 0, OwnedParams::grad(*emb, 0));
  fd.check_param("decoder db", *dec, 0, OwnedParams::grad(*dec, 0));
  fd.check_input("decoder dx", *x, read_all(*dx));
}

// bf16 compute: the same ops on bf16 data agree with f32 to bf16 precision.
TEST_F(TransformerOps, Bf16ForwardsMatchF32) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  auto bf = make_backend(BackendKind::cpu, {Precision::bf16, 2, 0});
  const auto xv = random_values(8 * 16, 81, -2.0f, 2.0f);
  const auto run_ln = [&](Backend& b, DType t) {
    auto x = b.tensor({8, 16}, t);
    x->write(xv);
    auto ln = b.layer_norm({"ln", 16, 1e-12f}, *x);
    OwnedParams o;
    o.bind(b, *ln);
    OwnedParams::randomize(*ln, 82, 0.5f, 1.5f);
    auto y = ln->make_output();
    ln->forward(*x, *y);
    return read_all(*y);
  };
  expect_close(run_ln(*bf, DType::bf16), run_ln(*be, DType::f32), 0.05, "layer norm bf16");
  const auto run_sm = [&](Backend& b, DType t) {
    auto x = b.tensor({2, 2, 4, 8}, t);
    x->write(xv);
    auto mask = b.tensor({2, 8}, DType::f32);
    mask->write(std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1e4f, -1e4f, -1e4f});
    auto y = b.tensor_like(*x);
    b.masked_softmax(*x)->forward(*x, *mask, *y);
    return read_all(*y);
  };
  expect_close(run_sm(*bf, DType::bf16), run_sm(*be, DType::f32), 0.01, "masked softmax bf16");
  const auto run_mm = [&](Backend& b, DType t) {
    BatchedMatmulSpec s{4, 4, 4, 8, false, true, 0.25f, 2, MatmulOperand::heads, MatmulOperand::heads, MatmulOperand::dense};
    auto q = b.tensor({8, 16}, t), k = b.tensor({8, 16}, t), c = b.tensor({2, 2, 4, 4}, t);
    q->write(xv), k->write(random_values(128, 83));
    b.batched_matmul(s, t)->forward(*q, *k, *c);
    return read_all(*c);
  };
  expect_close(run_mm(*bf, DType::bf16), run_mm(*be, DType::f32), 0.05, "batched matmul bf16");
  const auto run_emb_dec = [&](Backend& b, DType t) {
    auto ids = b.tensor({3}, DType::s32);
    ids->write_indices(std::vector<int32_t>{2, 0, 2});
    auto emb = b.embedding({"w", 5, 16}, *ids);
    auto x = b.tensor({2, 16}, t);
    x->write(std::vector<float>(xv.begin(), xv.begin() + 32));
    auto dec = b.tied_linear({"d", 16, 5, true}, *emb, *x);
    OwnedParams o;
    o.bind(b, *emb), o.bind(b, *dec);
    OwnedParams::randomize(*emb, 84), OwnedParams::randomize(*dec, 85);
    emb->refresh_compute_weights();
    auto e = emb->make_output();
    auto y = dec->make_output();
    EXPECT_EQ(e->dtype(), t);
    emb->forward(*ids, *e);
    dec->forward(*x, *y);
    auto out = read_all(*e);
    const auto yv = read_all(*y);
    out.insert(out.end(), yv.begin(), yv.end());
    return out;
  };
  expect_close(run_emb_dec(*bf, DType::bf16), run_emb_dec(*be, DType::f32), 0.05, "embedding + tied decoder bf16");
}

}  // namespace
}  // namespace dlperf::testing
