// BERT end to end on the CPU backend: the BERT-base parameter count, a reduced model learning
// the synthetic task (masked token = continuation of its neighbours) with LAMB and AdamW in
// fp32 and bf16, bit-for-bit determinism with dropout on, and the optimizers' kernels against
// a scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "models/bert.h"
#include "train/optim/adam.h"
#include "train/feed/bert_data.h"
#include "train/param_store.h"
#include "../common/cpu_bf16.h"

namespace dlperf {
namespace {

TEST(BertModel, BaseParameterCountIs110106428) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  BertConfig c;  // BERT-base; the smallest batch and sequence keep the activations small
  c.batch = 1, c.seq_len = 8, c.max_predictions = 2;
  auto model = make_bert(*be, c);
  int64_t n = 0;
  for (Layer* l : model->layers())
    for (const auto& p : l->params()) n += product(p.dims);
  EXPECT_EQ(n, 110106428);  // HuggingFace BertForPreTraining, the tied decoder counted once
  EXPECT_EQ(bert_parameter_count(c), 110106428);
}

TEST(BertModel, BadConfigurationIsAUsageError) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  BertConfig c;
  c.hidden = 100, c.heads = 12;
  try {
    make_bert(*be, c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("--bert-hidden"), std::string::npos) << e.what();
  }
}

BertConfig reduced() {
  BertConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 64, c.positions = 64;
  c.batch = 8, c.seq_len = 32, c.max_predictions = 5, c.dropout = 0.1f, c.dropout_seed = 3;
  return c;
}

std::vector<float> train(Precision prec, const std::string& optimizer, int steps, float lr) {
  auto be = make_backend(BackendKind::cpu, {prec, 2, 0});
  const BertConfig c = reduced();
  auto model = make_bert(*be, c);
  ParamStore store(*be, model->layers());
  model->init_params(7);
  const AdamConfig adam{0.9f, 0.999f, 1e-6f, 0.01f};
  std::unique_ptr<Optimizer> opt;
  if (optimizer == "lamb") opt = std::make_unique<Lamb>(*be, store, adam);
  else opt = std::make_unique<AdamW>(*be, store, adam);
  opt = std::make_unique<ClipGradNorm>(*be, store, std::move(opt), 1.0f);
  SyntheticTokens data({c.batch, c.seq_len, c.max_predictions, c.vocab}, 11);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    model->load(data.next());
    for (Layer* l : model->layers()) l->refresh_compute_weights();
    model->forward();
    losses.push_back(model->loss());
    model->backward(1.0f, [](const Layer&) {});
    opt->step(lr, 1.0f);
  }
  return losses;
}

float mean(const std::vector<float>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to), 0.0f) / static_cast<float>(to - from);
}

void expect_learns(const std::vector<float>& l, float drop) {
  const float first = mean(l, 0, 4), last = mean(l, l.size() - 4, l.size());
  for (float x : l) EXPECT_TRUE(std::isfinite(x));
  EXPECT_LT(last, first - drop) << "loss " << first << " -> " << last;
}

TEST(BertTraining, LambLowersTheLossFp32) { expect_learns(train(Precision::fp32, "lamb", 30, 0.02f), 0.8f); }
TEST(BertTraining, AdamWLowersTheLossFp32) { expect_learns(train(Precision::fp32, "adamw", 30, 3e-3f), 0.8f); }
TEST(BertTraining, LambLowersTheLossBf16) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  expect_learns(train(Precision::bf16, "lamb", 30, 0.02f), 0.8f);
}

TEST(BertTraining, SameSeedSameLossesBitForBit) {
  const auto a = train(Precision::fp32, "lamb", 4, 0.02f), b = train(Precision::fp32, "lamb", 4, 0.02f);
  EXPECT_EQ(a, b);
}

// The fused kernels against a scalar transcription of torch.optim.AdamW and LAMB.
TEST(BertOptimizerKernels, AdamWAndLambMatchScalarReference) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  const size_t n = 37;
  std::vector<float> w(n), g(n), m(n, 0.0f), v(n, 0.0f), u(n);
  for (size_t i = 0; i < n; ++i) w[i] = std::sin(0.3f * i), g[i] = std::cos(0.7f * i);
  auto rw = w;
  std::vector<double> rm(n, 0.0), rv(n, 0.0);
  const AdamStep s0{1e-2f, 0.9f, 0.999f, 1e-6f, 0.1f, 0.5f, 1};
  for (int64_t t = 1; t <= 3; ++t) {
    AdamStep s = s0;
    s.step = t;
    be->adamw_step(w, g, m, v, s);
    for (size_t i = 0; i < n; ++i) {
      const double gs = g[i] * 0.5;
      rm[i] = 0.9 * rm[i] + 0.1 * gs;
      rv[i] = 0.999 * rv[i] + 0.001 * gs * gs;
      const double mh = rm[i] / (1 - std::pow(0.9, t)), vh = rv[i] / (1 - std::pow(0.999, t));
      rw[i] = static_cast<float>(rw[i] * (1 - 1e-2 * 0.1) - 1e-2 * mh / (std::sqrt(vh) + 1e-6));
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(w[i], rw[i], 1e-5) << i;
  // LAMB: one step from zero moments: u = sign-like Adam step + wd w, ratio ||w|| / ||u||
  std::fill(m.begin(), m.end(), 0.0f), std::fill(v.begin(), v.end(), 0.0f);
  const auto w0 = w;
  const LambNorms norms = be->lamb_update(w, g, m, v, u, s0);
  double w_sq = 0, u_sq = 0;
  for (size_t i = 0; i < n; ++i) {
    const double gs = g[i] * 0.5, ref = (0.1 * gs / 0.1) / (std::sqrt(0.001 * gs * gs / 0.001) + 1e-6) + 0.1 * w0[i];
    EXPECT_NEAR(u[i], ref, 1e-5) << i;
    w_sq += static_cast<double>(w0[i]) * w0[i], u_sq += ref * ref;
  }
  EXPECT_NEAR(norms.w_sq, w_sq, 1e-4 * w_sq);
  EXPECT_NEAR(norms.u_sq, u_sq, 1e-4 * u_sq);
  be->lamb_apply(w, u, 0.5f, nullptr);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(w[i], w0[i] - 0.5f * u[i], 1e-6);
  EXPECT_NEAR(be->sum_squares(w0), w_sq, 1e-6 * w_sq);
}

}  // namespace
}  // namespace dlperf
