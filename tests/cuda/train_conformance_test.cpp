// Reduced ResNet v1.5, VGG16 and BERT trained for 10 steps on the CPU backend (f32) and on the
// CUDA backend in every precision from the same initial parameters and batches; the losses must
// agree step by step: within 1e-3 relative for fp32 (summation order only), 3e-2 for tf32 and
// fp16, 6e-2 for bf16 (8-bit mantissas). Dropout is off so both backends train the same
// function (each backend draws its own masks). fp16 runs with a static loss scale of 1024, as
// the trainer's dynamic scaling would start in steps this short.
//
// The reduced ResNet is compared over its first 4 steps only, at learning rate 0.002: its loss
// is chaotic further on whatever the backend. On the CPU backend alone, 1 thread against 2
// (summation order only, 1e-7 apart at step 1) drifts to 4% by step 6 and 13% by step 8 at
// learning rate 0.02 (batch norm over 8 values per channel at 1x1 in layer4), which an H200
// run of this test failed on (fp32 off by 0.2% at step 5, 9% at step 6): a test of the model's
// sensitivity, not of the backend. At 0.002, the CPU's bf16 against its f32 stays within 2% over
// the 4 steps compared; VGG16 and BERT stay well conditioned for all 10 at their rates.
#include <cmath>
#include <ostream>

#include "conformance_util.h"
#include "models/bert.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "train/optim/adam.h"
#include "train/feed/bert_data.h"
#include "train/param_store.h"
#include "train/feed/synthetic_data.h"

namespace dlperf {
namespace {

using namespace cuda_test;

constexpr int kSteps = 10;
constexpr int kResNetSteps = 4;  // compared (see the top of this file)

double step_tolerance(Precision p) {
  switch (p) {
    case Precision::fp32: return 1e-3;
    case Precision::tf32: return 3e-2;
    case Precision::fp16: return 3e-2;
    case Precision::bf16: return 6e-2;
  }
  return 1e-3;
}

enum class Net { resnet, vgg, bert };
const char* net_name(Net n) { return n == Net::resnet ? "ResNet" : n == Net::vgg ? "Vgg" : "Bert"; }
void PrintTo(Net n, std::ostream* os) { *os << net_name(n); }  // gtest's test listing

std::vector<float> train(BackendKind kind, Precision p, Net net) {
  BackendOptions o;
  o.precision = p;
  o.threads = 2;
  auto be = make_backend(kind, o);
  std::unique_ptr<Model> model;
  std::unique_ptr<DataSource> data;
  if (net == Net::resnet) {
    ResNetConfig c;
    c.blocks = {1, 1, 1, 1}, c.width = 8, c.classes = 10, c.batch = 8, c.image_size = 32;
    model = make_resnet(*be, c);
    data = std::make_unique<SyntheticImages>(c.batch, c.image_size, c.classes, 5, 4);
  } else if (net == Net::vgg) {
    VggConfig c;
    c.width = 8, c.hidden = 32, c.classes = 10, c.batch = 4, c.image_size = 32, c.dropout = 0.0f;
    model = make_vgg(*be, c);
    data = std::make_unique<SyntheticImages>(c.batch, c.image_size, c.classes, 5, 4);
  } else {
    BertConfig c;
    c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 101, c.positions = 64;  // vocabulary not a multiple of 8
    c.batch = 4, c.seq_len = 16, c.max_predictions = 4, c.dropout = 0.0f;
    model = make_bert(*be, c);
    data = std::make_unique<SyntheticTokens>(BertDataShape{c.batch, c.seq_len, c.max_predictions, c.vocab}, 11);
  }
  ParamStore store(*be, model->layers());
  model->init_params(7);
  std::unique_ptr<Optimizer> opt;
  if (net == Net::bert) opt = std::make_unique<AdamW>(*be, store, AdamConfig{0.9f, 0.999f, 1e-6f, 0.01f});
  else opt = std::make_unique<Sgd>(*be, store, SgdConfig{0.9f, 5e-4f});
  const float scale = p == Precision::fp16 ? 1024.0f : 1.0f;
  const auto layers = model->layers();
  std::vector<float> losses;
  for (int s = 0; s < kSteps; ++s) {
    model->load(data->next());
    be->refresh_compute_weights(layers);
    model->forward();
    losses.push_back(model->loss());
    model->backward(scale, [](const Layer&) {});
    opt->step(net == Net::bert ? 1e-3f : net == Net::resnet ? 0.002f : 0.02f, 1.0f / scale);
  }
  be->synchronize();
  return losses;
}

class TrainConformance : public ::testing::TestWithParam<Net> {
 protected:
  void SetUp() override { DLPERF_NEED_GPU(); }
};

TEST_P(TrainConformance, LossesAgreeWithTheCpuBackend) {
  const Net net = GetParam();
  const auto want = train(BackendKind::cpu, Precision::fp32, net);
  for (float l : want) ASSERT_TRUE(std::isfinite(l));
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16}) {
    const auto got = train(BackendKind::cuda, p, net);
    ASSERT_EQ(got.size(), want.size());
    const size_t compared = net == Net::resnet ? kResNetSteps : want.size();
    for (size_t i = 0; i < compared; ++i)
      EXPECT_NEAR(got[i], want[i], step_tolerance(p) * std::fabs(want[i])) << name(p) << " step " << i;
  }
}

TEST_P(TrainConformance, SameSeedSameLossesBitForBit) {
  const auto a = train(BackendKind::cuda, Precision::fp16, GetParam());
  const auto b = train(BackendKind::cuda, Precision::fp16, GetParam());
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainConformance, ::testing::Values(Net::resnet, Net::vgg, Net::bert), [](const auto& param_info) {
  return std::string(net_name(param_info.param));
});

}  // namespace
}  // namespace dlperf
