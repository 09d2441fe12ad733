// --recompute block on the CUDA backend (issue 25): one fp32 step of a reduced ResNet (batch
// norm's running statistics must not move twice: momentum 0 on the rerun), BERT (dropout's
// counter repeats) and Llama with and without recompute give bitwise-identical gradients,
// as tests/train/recompute_test.cpp checks on the cpu backend. Skips without a GPU.
#include <gtest/gtest.h>

#include "../train/recompute_util.h"
#include "conformance_util.h"
#include "models/bert.h"
#include "models/llama.h"
#include "models/resnet.h"
#include "train/feed/bert_data.h"
#include "train/feed/llama_data.h"
#include "train/feed/synthetic_data.h"

namespace dlperf {
namespace {

using recompute_test::expect_bitwise;
using recompute_test::step;
using recompute_test::StepResult;

TEST(RecomputeConformance, ResNetGradientsAreBitwiseIdentical) {
  DLPERF_NEED_GPU();
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
    r[rec] = step([&](Backend& be) { return make_resnet(be, rc); }, data, BackendKind::cuda);
  }
  expect_bitwise(r[0], r[1]);
}

TEST(RecomputeConformance, BertGradientsAreBitwiseIdenticalWithDropout) {
  DLPERF_NEED_GPU();
  BertConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 64, c.positions = 64;
  c.batch = 4, c.seq_len = 16, c.max_predictions = 3, c.dropout = 0.1f, c.dropout_seed = 3;
  StepResult r[2];
  for (int rec = 0; rec < 2; ++rec) {
    c.recompute = rec == 1;
    SyntheticTokens data({c.batch, c.seq_len, c.max_predictions, c.vocab}, 11, 2);
    r[rec] = step([&](Backend& be) { return make_bert(be, c); }, data, BackendKind::cuda);
  }
  expect_bitwise(r[0], r[1]);
}

TEST(RecomputeConformance, LlamaGradientsAreBitwiseIdentical) {
  DLPERF_NEED_GPU();
  LlamaConfig c = llama_preset("llama3_8b");
  c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.ffn = 128, c.vocab = 64;
  c.batch = 2, c.seq_len = 16;
  StepResult r[2];
  for (int rec = 0; rec < 2; ++rec) {
    c.recompute = rec == 1;
    SyntheticLlamaTokens data(c.batch, c.seq_len, c.vocab, 5, 2);
    r[rec] = step([&](Backend& be) { return make_llama(be, c); }, data, BackendKind::cuda);
  }
  expect_bitwise(r[0], r[1]);
}

}  // namespace
}  // namespace dlperf
