// What the reduced-shape CUDA tests miss (issue 26, the static review's finding 12), on a GPU:
//   * ResNet-50 and VGG16 at batch 64, 224x224, in fp16, bf16 and tf32: every convolution (the
//     3-channel stem included) and GEMM planned on a tensor-core engine, no fallback anywhere,
//     the 2048 -> 1000 and 25088 -> 4096 Linear layers on their cuBLASLt epilogues;
//   * BERT layers at hidden 1,024 and 5,120 (the layer-norm kernels' 256- and 1,024-thread
//     variants) planned and run forward and backward with finite results;
//   * fp16 end to end with the trainer's device-side dynamic loss scale: an overflowing step is
//     skipped and the scale halved, good steps grow it, step by step as apex's rule says, and
//     the same with --cuda-graph replaying the step.
// Without a GPU every test skips and says so. On an H100: about a minute in all (planning runs
// each cuDNN plan once on scratch buffers).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>

#include "backend/backend.h"
#include "gpu_presence.h"
#include "models/bert.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "train/feed/bert_data.h"
#include "train/optim/optimizer.h"
#include "train/param_store.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf {
namespace {

using cuda_test::have_gpu;
#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: real-shape plans and fp16 loss scaling are checked on a GPU only"

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Every planned kernel takes its fast path: no fallback, no reference kernel, and every
// convolution and GEMM on tensor cores. Returns how many kernels name `stem` on tensor cores.
int expect_fast_paths(const Backend& be, Precision p, const std::string& what, const std::string& stem) {
  int stem_tc = 0;
  for (const auto& k : be.planned_kernels()) {
    const std::string where = what + " " + to_string(p) + ": " + k.op + " " + k.pass + " " + k.shape + ": " + k.impl;
    EXPECT_FALSE(contains(k.impl, "(fallback)")) << where;
    EXPECT_FALSE(k.reference) << where;
    EXPECT_FALSE(contains(k.impl, "[no tensor cores]")) << where;
    if (k.op == stem && contains(k.impl, "[tensor cores]")) ++stem_tc;
  }
  return stem_tc;
}

class RealShapes : public ::testing::TestWithParam<Precision> {};

TEST_P(RealShapes, ResNet50Batch64PlansEveryOpOnTensorCores) {
  SKIP_WITHOUT_GPU();
  BackendOptions o;
  o.precision = GetParam();
  o.deterministic = false;  // dlperf-train's default: the fastest engines
  auto be = make_backend(BackendKind::cuda, o);
  ResNetConfig c;
  c.batch = 64;
  auto model = make_resnet(*be, c);
  // conv1 (3 channels, run padded to 4): forward and weight gradient, no data gradient
  EXPECT_EQ(expect_fast_paths(*be, GetParam(), "resnet50 b64", "conv1"), 2) << "the stem's forward and backward_weights on tensor cores";
  bool fc_lt = false;
  for (const auto& k : be->planned_kernels()) fc_lt = fc_lt || (k.op == "fc" && contains(k.impl, "cublaslt"));
  EXPECT_TRUE(fc_lt) << "the 2048 -> 1000 classifier on its cuBLASLt epilogue";
}

TEST_P(RealShapes, Vgg16Batch64PlansEveryOpOnTensorCores) {
  SKIP_WITHOUT_GPU();
  BackendOptions o;
  o.precision = GetParam();
  o.deterministic = false;
  auto be = make_backend(BackendKind::cuda, o);
  VggConfig c;
  c.batch = 64;
  auto model = make_vgg(*be, c);
  EXPECT_GE(expect_fast_paths(*be, GetParam(), "vgg16 b64", "features.0"), 2) << "the stem's forward and backward_weights on tensor cores";
  int lt = 0;
  for (const auto& k : be->planned_kernels()) lt += contains(k.impl, "cublaslt") ? 1 : 0;
  EXPECT_EQ(lt, 6) << "three classifier Linear layers, forward and bias gradient each on a cuBLASLt epilogue";
}

INSTANTIATE_TEST_SUITE_P(TensorCorePrecisions, RealShapes, ::testing::Values(Precision::fp16, Precision::bf16, Precision::tf32),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// One BERT layer stack at the widths where the layer-norm kernels change variant: forward and
// backward run (the launches are checked) and give a finite loss.
class BertWidths : public ::testing::TestWithParam<int64_t> {};

TEST_P(BertWidths, PlansAndTrainsOneStep) {
  SKIP_WITHOUT_GPU();
  BackendOptions o;
  o.precision = Precision::fp16;
  auto be = make_backend(BackendKind::cuda, o);
  BertConfig c;
  c.layers = 1, c.hidden = GetParam(), c.heads = 16, c.intermediate = 4 * GetParam(), c.vocab = 30522;
  c.batch = 2, c.seq_len = 128, c.max_predictions = 20;
  auto model = make_bert(*be, c);
  for (const auto& k : be->planned_kernels()) EXPECT_FALSE(contains(k.impl, "(fallback)")) << k.op << " " << k.pass << ": " << k.impl;
  ParamStore store(*be, model->layers());
  model->init_params(5);
  SyntheticTokens data(BertDataShape{c.batch, c.seq_len, c.max_predictions, c.vocab}, 3);
  model->load(data.next());
  be->refresh_compute_weights(model->layers());
  model->forward();
  model->backward(1024.0f, [](const Layer&) {});
  be->synchronize();
  EXPECT_TRUE(std::isfinite(model->loss())) << "hidden " << GetParam();
  EXPECT_TRUE(std::isfinite(be->sum_squares({store.grads().data(), store.size()}))) << "gradients of hidden " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(LayerNormVariants, BertWidths, ::testing::Values(int64_t{1024}, int64_t{5120}));

// Reduced ResNet, fp16, the trainer's dynamic loss scale starting at 2^24: the first steps
// overflow (dL/dlogits x 2^24 is past f16's 65,504). The trace's loss_scale and skipped must
// follow apex's rule exactly: skip -> halve (good count reset), growth_interval good steps ->
// double.
struct ScaleRun {
  std::vector<float> losses, scales;
  std::vector<bool> skipped;
};
ScaleRun train_fp16(bool graph) {
  BackendOptions o;
  o.precision = Precision::fp16;
  auto be = make_backend(BackendKind::cuda, o);
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1}, rc.width = 8, rc.classes = 10, rc.batch = 8, rc.image_size = 32;
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(3);
  Sgd sgd(*be, store, SgdConfig{0.9f, 1e-4f});
  TrainConfig tc;
  tc.iterations = 40;
  tc.warmup = 4;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::constant, 0.02f, 0, tc.iterations};
  tc.loss_scale = {LossScaling::dynamic, 16777216.0f, 4};
  tc.cuda_graph = graph;
  SyntheticImages data(rc.batch, rc.image_size, rc.classes, 5);
  Trainer t(*model, *be, sgd, tc, &store.grads());
  RankTrace trace;
  t.run(data, nullptr, trace, {}, nullptr);
  ScaleRun r;
  for (const auto& it : trace.iterations) {
    r.losses.push_back(it.loss);
    r.scales.push_back(it.loss_scale);
    r.skipped.push_back(it.skipped);
  }
  return r;
}

void expect_apex_rule(const ScaleRun& r, int64_t growth_interval) {
  ASSERT_GE(r.scales.size(), 2u);
  EXPECT_TRUE(r.skipped[0]) << "2^24 overflows f16 at the first step";
  float scale = r.scales[0];
  int64_t good = 0, applied = 0, grown = 0;
  for (size_t i = 0; i < r.scales.size(); ++i) {
    EXPECT_EQ(r.scales[i], scale) << "iteration " << i;
    EXPECT_TRUE(std::isfinite(r.losses[i])) << "iteration " << i;
    if (r.skipped[i]) {
      scale *= 0.5f, good = 0;
    } else if (++good >= growth_interval) {
      scale *= 2.0f, good = 0, ++grown;
    }
    applied += r.skipped[i] ? 0 : 1;
  }
  EXPECT_GT(applied, 15) << "the scale settles and most steps apply (at worst 4 of 5 once it has)";
  EXPECT_GT(grown, 0) << "good steps grow the scale";
}

TEST(Fp16LossScale, DeviceDynamicScaleSkipsHalvesAndGrows) {
  SKIP_WITHOUT_GPU();
  expect_apex_rule(train_fp16(false), 4);
}

TEST(Fp16LossScale, CudaGraphReplaysTheSameScaleDecisions) {
  SKIP_WITHOUT_GPU();
  const ScaleRun eager = train_fp16(false), graph = train_fp16(true);
  expect_apex_rule(graph, 4);
  ASSERT_EQ(eager.scales.size(), graph.scales.size());
  for (size_t i = 0; i < eager.scales.size(); ++i) {
    EXPECT_EQ(graph.scales[i], eager.scales[i]) << "iteration " << i;
    EXPECT_EQ(graph.skipped[i], eager.skipped[i]) << "iteration " << i;
    EXPECT_NEAR(graph.losses[i], eager.losses[i], 1e-3f * (1.0f + std::fabs(eager.losses[i]))) << "iteration " << i;
  }
}

}  // namespace
}  // namespace dlperf
