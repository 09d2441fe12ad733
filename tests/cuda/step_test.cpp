// The CUDA side of the step without host synchronisation (issue 13), each test against the CPU
// backend or a plain expectation: the recorder's events and asynchronous values, the pinned
// double-buffered input pipe, the step gate and the gated optimizer kernels, CUDA graphs
// replaying a step with the eager losses (SGD; AdamW and LAMB), device facts, and recovery from running out of
// device memory. Every test skips itself on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "backend/backend.h"
#include "../common/timing_checks.h"
#include "gpu_presence.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/llama.h"
#include "models/resnet.h"
#include "train/optim/adam.h"
#include "train/param_store.h"
#include "train/feed/bert_data.h"
#include "train/feed/llama_data.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf {
namespace {

using cuda_test::have_gpu;

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

TEST(CudaStep, RecorderMarksAreOrderedAndValuesArrive) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  auto buf = be->buffer(4);
  auto rec = be->step_recorder();
  for (int64_t step = 0; step < 6; ++step) {
    rec->begin(step);
    EXPECT_EQ(rec->mark(), 0);
    be->fill(buf->data(), 4, static_cast<float>(step) + 0.5f);
    EXPECT_EQ(rec->value(buf->data() + 2), 0);
    EXPECT_EQ(rec->mark(), 1);
    if (step == 0) continue;
    const StepReadings r = rec->read(step - 1, {}, std::chrono::seconds(10));  // a step late
    ASSERT_EQ(r.marks.size(), 2u);
    ASSERT_EQ(r.values.size(), 1u);
    EXPECT_LE(r.marks[0], r.marks[1]);
    EXPECT_EQ(r.values[0], static_cast<float>(step - 1) + 0.5f);
  }
  const StepReadings last = rec->read(5, {}, std::chrono::seconds(10));
  EXPECT_EQ(last.values.at(0), 5.5f);
}

// A step records a value per loss term and micro-batch: BERT with --grad-accum 32 takes 66, past
// the 64 the recorder once held (an internal error at the first step). Every value arrives, in
// order, in every slot.
TEST(CudaStep, RecorderKeepsEveryValueOfALongStep) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  constexpr int kValues = 150;
  auto buf = be->buffer(kValues);
  std::vector<float> host(kValues);
  auto rec = be->step_recorder();
  for (int64_t step = 0; step < 5; ++step) {
    for (int i = 0; i < kValues; ++i) host[static_cast<size_t>(i)] = static_cast<float>(1000 * step + i);
    buf->write(host);
    rec->begin(step);
    rec->mark();
    for (int i = 0; i < kValues; ++i) ASSERT_EQ(rec->value(buf->data() + i), i);
    rec->mark();
    const StepReadings r = rec->read(step, {}, std::chrono::seconds(10));
    ASSERT_EQ(r.values.size(), static_cast<size_t>(kValues));
    for (int i = 0; i < kValues; ++i) EXPECT_EQ(r.values[static_cast<size_t>(i)], static_cast<float>(1000 * step + i)) << i;
  }
}

TEST(CudaStep, InputPipeDeliversEachBatchInOrder) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  TensorPtr images = be->tensor({2, 3, 4, 4}, DType::f32), labels = be->tensor({2}, DType::s32);
  std::vector<Tensor*> inputs{images.get(), labels.get()};
  const int64_t before = be->allocated_bytes();
  auto pipe = be->input_pipe(inputs);
  ASSERT_TRUE(pipe);
  // What the memory plan counts for it (its "input staging" row) is what it allocated.
  EXPECT_EQ(be->allocated_bytes() - before, static_cast<int64_t>(be->input_pipe_bytes(inputs)));
  EXPECT_GE(be->input_pipe_bytes(inputs), 96 * sizeof(float) + 2 * sizeof(int32_t));
  const auto batch = [](int k) {
    std::vector<float> x(96);
    std::iota(x.begin(), x.end(), static_cast<float>(100 * k));
    return x;
  };
  auto fill = [&](int k) {
    auto slot = pipe->host_slot();
    slot[0]->write(batch(k));
    slot[1]->write_indices(std::vector<int32_t>{k, -k});
    pipe->send();
  };
  fill(0);
  for (int k = 0; k < 5; ++k) {
    pipe->deliver();
    fill(k + 1);  // the next batch's copy overlaps this "step"
    std::vector<float> x(96), l(2);
    images->read(x);
    labels->read(l);
    EXPECT_EQ(x, batch(k)) << "batch " << k;
    EXPECT_EQ(l, (std::vector<float>{static_cast<float>(k), static_cast<float>(-k)}));
  }
}

// The same sequence of gradients through both backends' gate updates gives the same gates.
TEST(CudaStep, StepGateMatchesTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_backend(BackendKind::cuda, {});
  auto cpu = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  const size_t n = 1000;
  auto g_gpu = gpu->buffer(n), gate_gpu = gpu->buffer(kGateFloats);
  std::vector<float> gate(kGateFloats, 0.0f);
  gate[gate_index(GateField::loss_scale)] = 1024.0f;
  gate_gpu->write(gate);
  const StepGateUpdate u{true, 2, 0.5f, 0.5f};
  for (int step = 0; step < 6; ++step) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = 0.01f * std::sin(static_cast<float>(i + step));
    if (step == 2) g[17] = INFINITY;
    if (step == 4) g[3] = NAN;
    g_gpu->write(g);
    cpu->update_step_gate(g, gate.data(), u);
    gpu->update_step_gate({g_gpu->data(), n}, gate_gpu->data(), u);
    std::vector<float> got(kGateFloats);
    gate_gpu->read(got);
    for (int f = 0; f < kGateFloats; ++f)
      EXPECT_NEAR(got[static_cast<size_t>(f)], gate[static_cast<size_t>(f)], 1e-6f * (1.0f + std::fabs(gate[static_cast<size_t>(f)])))
          << "step " << step << " field " << f;
  }
  EXPECT_EQ(gate[gate_index(GateField::skipped)], 2.0f);
}

// Skipped steps change nothing; lr and gradient scale come from the gate, as on the CPU.
TEST(CudaStep, GatedOptimizersMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_backend(BackendKind::cuda, {});
  auto cpu = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  const size_t n = 513;
  std::vector<float> w0(n), g(n);
  for (size_t i = 0; i < n; ++i) w0[i] = std::sin(0.1f * static_cast<float>(i)), g[i] = std::cos(0.2f * static_cast<float>(i));
  for (float skip : {0.0f, 1.0f}) {
    std::vector<float> gate(kGateFloats, 0.0f);
    gate[gate_index(GateField::skip)] = skip;
    gate[gate_index(GateField::grad_scale)] = 0.25f;
    gate[gate_index(GateField::lr)] = 0.01f;
    gate[gate_index(GateField::applied)] = 3.0f;
    auto dw = gpu->buffer(n), dg = gpu->buffer(n), dm = gpu->buffer(n), dv = gpu->buffer(n), dgate = gpu->buffer(kGateFloats);
    dw->write(w0);
    dg->write(g);
    dgate->write(gate);
    std::vector<float> w = w0, m(n, 0.0f), v(n, 0.0f);
    const AdamStep a{1.0f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1, nullptr};
    AdamStep ac = a, ag = a;
    ac.gate = gate.data();
    ag.gate = dgate->data();
    cpu->adamw_step(w, g, m, v, ac);
    gpu->adamw_step({dw->data(), n}, {dg->data(), n}, {dm->data(), n}, {dv->data(), n}, ag);
    cpu->sgd_step(w, g, m, SgdStep{1.0f, 0.9f, 1e-4f, 1.0f, false, gate.data()});
    gpu->sgd_step({dw->data(), n}, {dg->data(), n}, {dm->data(), n}, SgdStep{1.0f, 0.9f, 1e-4f, 1.0f, false, dgate->data()});
    std::vector<float> got(n);
    dw->read(got);
    if (skip != 0.0f) {
      EXPECT_EQ(w, w0);
    }
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], w[i], 1e-6f) << "skip " << skip << " element " << i;
  }
}

struct ResNetRun {
  std::vector<float> losses;
  InputMode mode{};
};

ResNetRun train_resnet(bool graph, InputMode input, int64_t iterations) {
  auto be = make_backend(BackendKind::cuda, {});
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1};
  rc.width = 8;
  rc.classes = 10;
  rc.batch = 8;
  rc.image_size = 32;
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(3);
  Sgd sgd(*be, store, SgdConfig{0.9f, 1e-4f});
  TrainConfig tc;
  tc.iterations = iterations;
  tc.warmup = 4;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::cosine, 0.05f, 2, iterations};
  tc.cuda_graph = graph;
  tc.input = input;
  SyntheticImages data(rc.batch, rc.image_size, rc.classes, 5);
  Trainer t(*model, *be, sgd, tc, &store.grads());
  RankTrace trace;
  t.run(data, nullptr, trace, {}, nullptr);
  test::expect_timing_holds_together(trace);  // the recorder's events on the host's clock, eager or replayed
  ResNetRun r;
  for (const auto& it : trace.iterations) r.losses.push_back(it.loss);
  r.mode = t.input_mode();
  return r;
}

// The check, reduced: graphs on and off train alike (the learning rate changes every
// step through the gate, so a graph that froze it would diverge).
TEST(CudaStep, GraphReplayGivesTheEagerLosses) {
  SKIP_WITHOUT_GPU();
  const auto eager = train_resnet(false, InputMode::automatic, 20), graph = train_resnet(true, InputMode::automatic, 20);
  EXPECT_EQ(eager.mode, InputMode::pipelined);
  ASSERT_EQ(eager.losses.size(), graph.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i)
    EXPECT_NEAR(graph.losses[i], eager.losses[i], 1e-5f * (1.0f + std::fabs(eager.losses[i]))) << "iteration " << i;
}

// The losses of a reduced model trained by the Trainer with an Adam-family optimizer, eagerly or
// replaying the step captured at the end of warm-up.
using MakeModel = std::function<std::unique_ptr<Model>(Backend&)>;
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(Backend&, ParamStore&)>;
std::vector<float> adam_losses(bool graph, const MakeModel& make_model, const MakeOptimizer& make_opt, DataSource& data, float lr) {
  auto be = make_backend(BackendKind::cuda, {});
  auto model = make_model(*be);
  ParamStore store(*be, model->layers());
  model->init_params(3);
  auto opt = make_opt(*be, store);
  TrainConfig tc;
  tc.iterations = 16;
  tc.warmup = 4;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::cosine, lr, 2, tc.iterations};
  tc.cuda_graph = graph;
  Trainer t(*model, *be, *opt, tc, &store.grads());
  RankTrace trace;
  t.run(data, nullptr, trace, {}, nullptr);
  std::vector<float> losses;
  for (const auto& it : trace.iterations) losses.push_back(it.loss);
  return losses;
}

void expect_same_losses(const std::vector<float>& eager, const std::vector<float>& graph) {
  ASSERT_EQ(eager.size(), graph.size());
  ASSERT_FALSE(eager.empty());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_NEAR(graph[i], eager[i], 1e-5f * (1.0f + std::fabs(eager[i]))) << "iteration " << i;
  EXPECT_NE(eager.front(), eager.back());  // it trained
}

// AdamW and LAMB read every per-step value from the gate (the learning rate, the gradient
// scale, the bias correction's step count) and keep LAMB's norms on the device, and dropout
// advances its call counter on the device, so a replayed step is the eager one: BERT (LAMB,
// dropout 0.1: a replay that froze the masks would draw one mask every step and train apart)
// and Llama (AdamW). BERT again under --recompute block: its second forward repeats the first
// one's masks (repeat_last_mask, no advance), in the replay as eagerly.
TEST(CudaStep, GraphReplayOfAdamFamilyStepsGivesTheEagerLosses) {
  SKIP_WITHOUT_GPU();
  for (const bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "bert, lamb, recompute block" : "bert, lamb");
    BertConfig c;
    c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 64, c.positions = 64;
    c.batch = 4, c.seq_len = 16, c.max_predictions = 3, c.dropout = 0.1f, c.dropout_seed = 3;
    c.recompute = recompute;
    const MakeModel bert = [&](Backend& be) -> std::unique_ptr<Model> { return make_bert(be, c); };
    const MakeOptimizer lamb = [](Backend& be, ParamStore& store) -> std::unique_ptr<Optimizer> {
      return std::make_unique<Lamb>(be, store, AdamConfig{});
    };
    std::vector<float> losses[2];
    for (int graph = 0; graph < 2; ++graph) {
      SyntheticTokens data({c.batch, c.seq_len, c.max_predictions, c.vocab}, 11);
      losses[graph] = adam_losses(graph == 1, bert, lamb, data, 2e-2f);
    }
    expect_same_losses(losses[0], losses[1]);
  }
  {
    SCOPED_TRACE("llama, adamw");
    LlamaConfig c = llama_preset("llama3_8b");
    c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.ffn = 128, c.vocab = 64;
    c.batch = 2, c.seq_len = 16;
    const MakeModel llama = [&](Backend& be) { return make_llama(be, c); };
    const MakeOptimizer adamw = [](Backend& be, ParamStore& store) -> std::unique_ptr<Optimizer> {
      return std::make_unique<AdamW>(be, store, AdamConfig{0.9f, 0.95f, 1e-8f, 0.1f});
    };
    std::vector<float> losses[2];
    for (int graph = 0; graph < 2; ++graph) {
      SyntheticLlamaTokens data(c.batch, c.seq_len, c.vocab, 5);
      losses[graph] = adam_losses(graph == 1, llama, adamw, data, 3e-3f);
    }
    expect_same_losses(losses[0], losses[1]);
  }
}

TEST(CudaStep, PipelinedInputTrainsLikeDirect) {
  SKIP_WITHOUT_GPU();
  const auto piped = train_resnet(false, InputMode::pipelined, 8), direct = train_resnet(false, InputMode::direct, 8);
  ASSERT_EQ(piped.losses.size(), direct.losses.size());
  for (size_t i = 0; i < piped.losses.size(); ++i)
    EXPECT_NEAR(piped.losses[i], direct.losses[i], 1e-5f * (1.0f + std::fabs(direct.losses[i]))) << "iteration " << i;
}

// write_bytes / write_indices from host memory return without a host sync (the review's
// finding 8: a pinned slot, a copy stream, a device staging buffer): the caller may reuse its
// buffer at once, and each write lands before the work queued after it, across slot reuse.
TEST(CudaStep, HostWritesAreAsyncAndOrdered) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  TensorPtr raw = be->tensor({4, 4, 4, 3}, DType::f32, Layout::canonical), ids = be->tensor({64}, DType::s32);
  std::vector<float> host(192);
  std::vector<int32_t> idx(64);
  for (int round = 0; round < 5; ++round) {  // more rounds than pinned slots
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(round * 1000 + static_cast<int>(i));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = round * 100 + static_cast<int32_t>(i);
    raw->write_bytes(host.data(), host.size() * sizeof(float));
    ids->write_indices(idx);
    std::fill(host.begin(), host.end(), -1.0f);  // the loader reuses its buffer at once
    std::fill(idx.begin(), idx.end(), -1);
    std::vector<float> got(192), got_ids(64);
    raw->read(got);
    ids->read(got_ids);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(round * 1000 + static_cast<int>(i))) << round << " " << i;
    for (size_t i = 0; i < got_ids.size(); ++i) ASSERT_EQ(got_ids[i], static_cast<float>(round * 100 + static_cast<int>(i))) << round;
  }
}

TEST(CudaStep, DeviceFactsAreFilled) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  const DeviceFacts f = be->device_facts();
  EXPECT_FALSE(f.model.empty());
  EXPECT_GT(f.memory_bytes, 0);
  EXPECT_FALSE(f.pci_bus_id.empty());
  for (const char* k : {"cuda", "cudnn", "cublas", "driver"}) EXPECT_FALSE(f.versions.at(k).empty()) << k;
  EXPECT_GT(be->device_memory_used_bytes(), 0);
  EXPECT_EQ(static_cast<int>(cuda_pci_bus_ids().size()), cuda_device_count());
}

// Running out of device memory is an OutOfMemoryError, and the device stays usable after it.
TEST(CudaStep, OutOfMemoryIsRecoverable) {
  SKIP_WITHOUT_GPU();
  auto be = make_backend(BackendKind::cuda, {});
  EXPECT_THROW(be->buffer(size_t{1} << 40), OutOfMemoryError);  // 4 TiB of floats
  auto ok = be->buffer(1024);
  std::vector<float> v(1024, 1.0f);
  ok->write(v);
  EXPECT_EQ(be->sum_squares({ok->data(), 1024}), 1024.0);
}

}  // namespace
}  // namespace dlperf
