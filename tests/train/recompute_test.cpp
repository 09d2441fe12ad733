// Activation recompute (issue 25, --recompute block): one fp32 step of a reduced model with and
// without recompute from the same parameters and batch gives bitwise-identical gradients
// (memcmp over every parameter's gradient), and batch norm's running statistics move once.
// Each test takes a second or less (times below: an idle 2-core machine).
#include <gtest/gtest.h>

#include <cstring>

#include "models/bert.h"
#include "models/llama.h"
#include "models/resnet.h"
#include "train/feed/bert_data.h"
#include "train/feed/llama_data.h"
#include "train/param_store.h"
#include "train/memory/size_limits.h"
#include "recompute_util.h"
#include "train/feed/synthetic_data.h"

namespace dlperf {
namespace {

using recompute_test::expect_bitwise;
using recompute_test::step;
using recompute_test::StepResult;

// 0.3 s: two blocks in layer1 (identity shortcut, blocks share their inner buffers) and a
// downsampling block in each later stage.
TEST(Recompute, ResNetGradientsAreBitwiseIdentical) {
  ResNetConfig rc;
  rc.blocks = {2, 1, 1, 1};
  rc.width = 16;
  rc.classes = 10;
  rc.batch = 4;
  rc.image_size = 32;
  StepResult r[2];
  for (int rec = 0; rec < 2; ++rec) {
    rc.recompute = rec == 1;
    SyntheticImages data(rc.batch, rc.image_size, rc.classes, 3, 2);
    r[rec] = step([&](Backend& be) { return make_resnet(be, rc); }, data);
  }
  EXPECT_FALSE(r[0].running.empty());
  expect_bitwise(r[0], r[1]);
}

// 0.2 s: two post-LN layers with dropout 0.1 on the attention probabilities and both sublayer
// outputs: the recomputed forward must draw the masks the first forward drew.
TEST(Recompute, BertGradientsAreBitwiseIdenticalWithDropout) {
  BertConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 64, c.positions = 64;
  c.batch = 4, c.seq_len = 16, c.max_predictions = 3, c.dropout = 0.1f, c.dropout_seed = 3;
  StepResult r[2];
  for (int rec = 0; rec < 2; ++rec) {
    c.recompute = rec == 1;
    SyntheticTokens data({c.batch, c.seq_len, c.max_predictions, c.vocab}, 11, 2);
    r[rec] = step([&](Backend& be) { return make_bert(be, c); }, data);
  }
  expect_bitwise(r[0], r[1]);
}

// 0.1 s: two blocks with grouped-query attention (4 query, 2 key/value heads).
TEST(Recompute, LlamaGradientsAreBitwiseIdentical) {
  LlamaConfig c = llama_preset("llama3_8b");
  c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.ffn = 128, c.vocab = 64;
  c.batch = 2, c.seq_len = 16;
  StepResult r[2];
  for (int rec = 0; rec < 2; ++rec) {
    c.recompute = rec == 1;
    SyntheticLlamaTokens data(c.batch, c.seq_len, c.vocab, 5, 2);
    r[rec] = step([&](Backend& be) { return make_llama(be, c); }, data);
  }
  expect_bitwise(r[0], r[1]);
}

// 0.4 s: what recompute is for. An 8-layer reduced BERT needs 32-36 MiB of the cpu backend's
// charged allocations (tensors and parameters; no optimizer here) with `none` and 16-20 MiB with
// `block` (measured with dlperf-train --memory-limit-mb); a 26 MiB budget sits between them.
TEST(Recompute, BertFitsABudgetThatNoneExceeds) {
  BertConfig c;
  c.layers = 8, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 256, c.positions = 64;
  c.batch = 8, c.seq_len = 64, c.max_predictions = 4, c.dropout = 0.1f;
  const auto build_and_step = [&](bool recompute) {
    BackendOptions bo;
    bo.threads = 2;
    bo.memory_limit_bytes = int64_t{26} << 20;
    auto be = make_backend(BackendKind::cpu, bo);
    c.recompute = recompute;
    auto model = make_bert(*be, c);
    ParamStore store(*be, model->layers());
    model->init_params(7);
    SyntheticTokens data({c.batch, c.seq_len, c.max_predictions, c.vocab}, 11, 1);
    model->load(data.next());
    model->forward();
    model->backward(LossGradScale(1.0f), [](const Layer&) {});
  };
  EXPECT_THROW(build_and_step(false), OutOfMemoryError);
  EXPECT_NO_THROW(build_and_step(true));
}

// The memory plan's activation floor (train/memory/size_limits.h) with recompute: transformers count
// every layer's output and one layer's full set; ResNet's floor (the stem) does not change.
TEST(Recompute, MemoryPlanFloorCountsRecompute) {
  for (const char* m : {"bert_base", "llama3_8b", "resnet50"}) {
    TrainOptions o;
    o.model = m;
    o.batch_size = 2;
    o.seq_len = 512;
    const double none = min_activation_bytes(o);
    o.recompute = "block";
    const double block = min_activation_bytes(o);
    if (o.model == "resnet50") {
      EXPECT_EQ(block, none);
    } else {
      EXPECT_LT(block, none) << m;
      EXPECT_GT(block, 0.0) << m;
    }
  }
  // BERT-base: 12 layers keep (S x H) each plus one layer's 4 S H + heads S^2, in 4-byte elements.
  TrainOptions o;
  o.model = "bert_base", o.batch_size = 2, o.seq_len = 512, o.recompute = "block";
  EXPECT_DOUBLE_EQ(min_activation_bytes(o), 4.0 * 2 * (12.0 * 512 * 768 + 4.0 * 512 * 768 + 12.0 * 512 * 512));
}

}  // namespace
}  // namespace dlperf
