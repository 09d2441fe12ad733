// Golden parity of the Llama model with PyTorch (tests/golden/make_llama_fixture.py, after Meta's
// llama/model.py; tests/golden/README.md; also its --tied variant, Llama 3.2's tied head): a 2-layer Llama 3.1, hidden 64, 4/2 heads, feed-forward
// 176, vocabulary 512, seq 32, batch 2, loaded with the fixture's weights and tokens; the loss,
// every parameter gradient and three steps of Llama 3's optimizer (clip 1.0, AdamW beta2 0.95,
// weight decay 0.1 on matrices) must match. fp32: per-tensor tolerances from the fixture's own
// fp32-vs-fp64 spread, max |x - ref| <= max(1e-4, 20 * fp32_max_rel_diff) * max |ref| (README's
// rule). bf16 (8 mantissa bits, fp32 master weights and softmax statistics): the loss within 1%,
// every gradient within 5% of max |ref| (measured: 2.5%).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../common/h5_fixture.h"
#include "models/llama.h"
#include "train/optim/adam.h"
#include "train/param_store.h"
#include "../common/cpu_bf16.h"

namespace dlperf {
namespace {

// Untied (Llama 3.1) and tied (Llama 3.2: head = embedding table, RoPE factor 32) fixtures.
std::string fixture(bool tied) { return std::string(DLPERF_GOLDEN_DIR) + (tied ? "/llama_tied_reduced.h5" : "/llama_reduced.h5"); }

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

struct Golden {
  // logits_chunk: tokens per chunk of the output head (--logits-chunk); 0: the whole batch.
  explicit Golden(Precision p, bool tied = false, int64_t logits_chunk = 0)
      : fx(fixture(tied)), be(make_backend(BackendKind::cpu, {p, 2, 0})) {
    LlamaConfig c = llama_preset(tied ? "llama3_2_1b" : "llama3_8b");
    c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.ffn = 176, c.vocab = 512, c.batch = 2, c.seq_len = 32;
    c.logits_chunk = logits_chunk;
    model = make_llama(*be, c);
    store = std::make_unique<ParamStore>(*be, model->layers());
    for (const auto& e : store->entries()) e.layer->write_param(e.index, fx.floats("/params/" + e.layer->params()[e.index].name));
    batch.ints[kLlamaTokens] = fx.ints("/tokens");
    model->load(batch);
  }
  void forward() {
    for (Layer* l : model->layers()) l->refresh_compute_weights();
    model->forward();
  }

  testing::H5Fixture fx;
  std::unique_ptr<Backend> be;
  std::unique_ptr<Model> model;
  std::unique_ptr<ParamStore> store;
  HostBatch batch;
};

// Every gradient against the fixture; rel_floor: the least relative tolerance (of max |ref|).
void expect_gradients(Golden& g, double rel_floor, double fp32_factor) {
  const auto grads = g.store->read_grads();
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < grads.size(); ++i) {
    const auto& e = g.store->entries()[i];
    const std::string path = "/grads/" + e.layer->params()[e.index].name;
    const auto ref = g.fx.floats(path);
    ASSERT_EQ(grads[i].size(), ref.size()) << path;
    double diff = 0;
    for (size_t j = 0; j < ref.size(); ++j) diff = std::max(diff, std::abs(static_cast<double>(grads[i][j]) - ref[j]));
    const double scale = max_abs(ref);
    const double tol = std::max(rel_floor, fp32_factor * g.fx.attribute(path, "fp32_max_rel_diff")[0]) * scale;
    EXPECT_LE(diff, tol) << path << " max |ref| " << scale;
    if (diff / scale > worst) worst = diff / scale, worst_name = path;
  }
  std::printf("worst relative gradient difference %.2e (%s)\n", worst, worst_name.c_str());
}

TEST(LlamaGolden, ParameterNamesAndCountMatchPyTorch) {
  Golden g(Precision::fp32);
  EXPECT_EQ(g.store->parameter_count(), 158016);
  EXPECT_EQ(g.store->entries().size(), 2u * 9u + 3u);  // every /params entry
}

TEST(LlamaGolden, LossAndEveryGradientMatchFp32) {
  Golden g(Precision::fp32);
  g.forward();
  const double loss = g.fx.scalar("/loss");
  EXPECT_NEAR(g.model->loss(), loss, 2e-5 * std::abs(loss));
  g.model->backward(1.0f, [](const Layer&) {});
  expect_gradients(g, 1e-4, 20);
}

TEST(LlamaGolden, LossAndEveryGradientFollowInBf16) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  Golden g(Precision::bf16);
  g.forward();
  const double loss = g.fx.scalar("/loss");
  EXPECT_NEAR(g.model->loss(), loss, 1e-2 * std::abs(loss));
  g.model->backward(1.0f, [](const Layer&) {});
  expect_gradients(g, 0.05, 0);
}

TEST(LlamaGolden, TiedHeadLossAndEveryGradientMatchFp32) {
  Golden g(Precision::fp32, true);
  EXPECT_EQ(g.store->parameter_count(), 125248);  // the table once
  EXPECT_EQ(g.store->entries().size(), 2u * 9u + 2u);
  g.forward();
  const double loss = g.fx.scalar("/loss");
  EXPECT_NEAR(g.model->loss(), loss, 2e-5 * std::abs(loss));
  g.model->backward(1.0f, [](const Layer&) {});
  expect_gradients(g, 1e-4, 20);  // tok_embeddings.weight: the head's and the lookup's gradients summed
}

// The output head and loss in 4 chunks of 16 of the 64 tokens (--logits-chunk 16): the same
// fixture, the same tolerances, untied and tied (the table's gradient then adds the head's
// chunks and the lookup's scatter).
TEST(LlamaGolden, ChunkedHeadLossAndEveryGradientMatchFp32) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Golden g(Precision::fp32, tied, 16);
    g.forward();
    const double loss = g.fx.scalar("/loss");
    EXPECT_NEAR(g.model->loss(), loss, 2e-5 * std::abs(loss));
    g.model->backward(1.0f, [](const Layer&) {});
    expect_gradients(g, 1e-4, 20);
  }
}

TEST(LlamaGolden, ChunkedHeadFollowsInBf16) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  Golden g(Precision::bf16, false, 16);
  g.forward();
  const double loss = g.fx.scalar("/loss");
  EXPECT_NEAR(g.model->loss(), loss, 1e-2 * std::abs(loss));
  g.model->backward(1.0f, [](const Layer&) {});
  expect_gradients(g, 0.05, 0);
}

// Chunked against whole on the same weights: the loss to f32 round-off, every gradient to 1e-6
// of its largest element (only the head's weight gradient is summed in another order), and the
// model holds a quarter of the logits.
TEST(LlamaGolden, ChunkedHeadEqualsTheWholeHeadAndHoldsAQuarterOfTheLogits) {
  Golden whole(Precision::fp32), chunked(Precision::fp32, false, 16);
  const int64_t logits_bytes = 64 * 512 * 4;
  EXPECT_GE(whole.be->allocated_bytes() - chunked.be->allocated_bytes(), logits_bytes * 3 / 4);
  whole.forward();
  chunked.forward();
  EXPECT_NEAR(chunked.model->loss(), whole.model->loss(), 1e-6 * whole.model->loss());
  whole.model->backward(1.0f, [](const Layer&) {});
  chunked.model->backward(1.0f, [](const Layer&) {});
  const auto a = whole.store->read_grads(), b = chunked.store->read_grads();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = max_abs(a[i]);
    for (size_t j = 0; j < a[i].size(); ++j) ASSERT_NEAR(b[i][j], a[i][j], 1e-6 * scale) << i << " " << j;
  }
}

TEST(LlamaGolden, Llama3OptimizerStepLossesMatch) {
  Golden g(Precision::fp32);
  std::unique_ptr<Optimizer> opt = std::make_unique<AdamW>(*g.be, *g.store, AdamConfig{0.9f, 0.95f, 1e-8f, 0.1f});
  opt = std::make_unique<ClipGradNorm>(*g.be, *g.store, std::move(opt), 1.0f);
  const auto ref = g.fx.floats("/steps/losses");
  for (size_t s = 0; s < ref.size(); ++s) {
    g.forward();
    EXPECT_NEAR(g.model->loss(), ref[s], 1e-4 * std::abs(ref[s])) << "step " << s;
    g.model->backward(1.0f, [](const Layer&) {});
    opt->step(1e-3f, 1.0f);
  }
}

}  // namespace
}  // namespace dlperf
