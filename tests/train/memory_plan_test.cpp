// The memory plan (issue 25): its parameter counts equal the built models' (reduced shapes, and
// the published full-size counts), so do its counts of matrices and filters (what sharded master
// weights shard), and its parameter-side bytes follow the options.
#include <gtest/gtest.h>

#include "train/memory_plan.h"
#include "train/registry.h"

namespace dlperf {
namespace {

int64_t built_count(const TrainOptions& o) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  auto model = make_model(o, *be);
  const int64_t all = ParamStore(*be, model->layers()).parameter_count();
  int64_t matrices = 0;
  for (const Layer* l : model->layers())
    for (const ParamSpec& p : l->params()) matrices += p.role == ParamRole::weight ? product(p.dims) : 0;
  EXPECT_EQ(planned_matrix_count(o), matrices) << o.model;
  return all;
}

TEST(MemoryPlan, ParameterCountsEqualTheBuiltModels) {
  TrainOptions r;
  r.model = "resnet50";
  r.resnet_blocks = {1, 2, 1, 1};
  r.resnet_width = 16;
  r.image_size = 32;
  r.num_classes = 7;
  r.batch_size = 1;
  EXPECT_EQ(planned_parameter_count(r), built_count(r));
  TrainOptions v;
  v.model = "vgg16";
  v.vgg_width = 16;
  v.vgg_hidden = 32;
  v.image_size = 64;
  v.num_classes = 5;
  v.batch_size = 1;
  EXPECT_EQ(planned_parameter_count(v), built_count(v));
  TrainOptions b;
  b.model = "bert_base";
  b.bert_layers = 2;
  b.bert_hidden = 64;
  b.bert_heads = 4;
  b.bert_intermediate = 96;
  b.bert_vocab = 200;
  b.seq_len = 16;
  b.max_predictions = 4;
  b.batch_size = 1;
  EXPECT_EQ(planned_parameter_count(b), built_count(b));
  for (const char* llama : {"llama3_8b", "llama3_2_1b"}) {  // untied and tied heads
    TrainOptions l;
    l.model = llama;
    l.llama_layers = 2;
    l.llama_hidden = 64;
    l.llama_heads = 4;
    l.llama_kv_heads = 2;
    l.llama_ffn = 176;
    l.llama_vocab = 512;
    l.seq_len = 16;
    l.batch_size = 1;
    EXPECT_EQ(planned_parameter_count(l), built_count(l)) << llama;
  }
  // Full sizes, as torchvision counts ResNet-50 and as Meta publishes Llama 3.1 8B and 3.2 1B.
  EXPECT_EQ(planned_parameter_count(TrainOptions{}), 25'557'032);
  TrainOptions l8;
  l8.model = "llama3_8b";
  EXPECT_EQ(planned_parameter_count(l8), 8'030'261'248);
  l8.model = "llama3_2_1b";
  EXPECT_EQ(planned_parameter_count(l8), 1'235'814'400);
}

TEST(MemoryPlan, OptimizerStateShrinksWithZeroAndRanks) {
  TrainOptions o;
  o.optimizer = "adamw";
  const MemoryPlan one = plan_memory(o, 1), eight = plan_memory(o, 8);
  const double P = static_cast<double>(one.parameters);
  EXPECT_DOUBLE_EQ(one.optimizer, 8 * P);  // m and v, f32
  EXPECT_DOUBLE_EQ(eight.optimizer, 8 * P);  // --zero 0: replicated
  o.zero = 1;
  EXPECT_DOUBLE_EQ(plan_memory(o, 8).optimizer, (8 * P + 4 * P) / 8);  // the shard's m, v and reduced gradients
  o.grad_accum = 4;
  o.precision = Precision::bf16;
  const MemoryPlan p = plan_memory(o, 8);
  EXPECT_DOUBLE_EQ(p.accumulation, 4 * P);
  EXPECT_DOUBLE_EQ(p.weights, 2 * P);
  EXPECT_DOUBLE_EQ(p.master, 4 * P / 8 + 4 * (P - static_cast<double>(planned_matrix_count(o))) * 7 / 8);  // sharded master
  EXPECT_GT(p.total(), p.weights + p.master + p.gradients);
  o.backend = BackendKind::cuda;  // its buffers keep decommitted memory: the whole master
  EXPECT_DOUBLE_EQ(plan_memory(o, 8).master, 4 * P);
  o.backend = BackendKind::cpu;
  o.zero = 0;
  EXPECT_DOUBLE_EQ(plan_memory(o, 8).master, 4 * P);
}

}  // namespace
}  // namespace dlperf
