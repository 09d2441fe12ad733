// VGG16 as a whole: parameter count of the full model (torchvision's vgg16()), the flatten
// reads the map in (C, H, W) order at 224x224's 7x7 too, loss falls on a learnable task with
// dropout on, the same seed gives bit-identical losses, and bf16 trains with f32 master weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "models/init.h"
#include "models/vgg.h"
#include "train/optim/optimizer.h"
#include "train/param_store.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"
#include "../common/cpu_bf16.h"

namespace dlperf {
namespace {

struct Rig {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Model> model;
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<Sgd> sgd;

  Rig(const VggConfig& vc, Precision p, uint64_t seed) {
    be = make_backend(BackendKind::cpu, {p, 2, 0});
    model = make_vgg(*be, vc);
    store = std::make_unique<ParamStore>(*be, model->layers());
    model->init_params(seed);
    he_classifier(seed);
    sgd = std::make_unique<Sgd>(*be, *store, SgdConfig{0.9f, 5e-4f});
  }

  // torchvision's N(0, 0.01) classifier makes a VGG without batch norm learn slowly at first
  // (the logits start ~1e-3 of the features; a short run learns little beyond the class
  // prior). He-normal (fan_in) linear weights, as the golden fixture uses, let a 40-step run
  // show the whole network learning.
  void he_classifier(uint64_t seed) {
    Rng rng(seed + 1);
    for (Layer* l : model->layers()) {
      const ParamSpec& p = l->params()[0];
      if (p.dims.size() != 2) continue;
      std::vector<float> w(static_cast<size_t>(product(p.dims)));
      normal_init(w, std::sqrt(2.0f / static_cast<float>(p.dims[1])), rng);
      l->write_param(0, w);
    }
  }

  std::vector<float> train(const VggConfig& vc, int64_t iterations, float lr, uint64_t seed) {
    TrainConfig tc;
    tc.iterations = iterations;
    tc.warmup = 0;
    tc.print_every = 0;
    tc.lr = {LrScheduleKind::constant, lr, 0, iterations};
    SyntheticImages data(vc.batch, vc.image_size, vc.classes, seed, 8);
    Trainer t(*model, *be, *sgd, tc);
    RankTrace trace;
    t.run(data, nullptr, trace, {}, nullptr);
    std::vector<float> losses;
    for (const auto& it : trace.iterations) losses.push_back(it.loss);
    return losses;
  }
};

// Widths /4, hidden 256, 10 classes, 32x32 (a 1x1 map), classifier dropout 0.5. Width 16, not
// less: oneDNN's jit convolutions want channels that fill 16-wide blocks (reference kernels, 100x
// slower, otherwise).
VggConfig small() {
  VggConfig vc;
  vc.width = 16;
  vc.hidden = 256;
  vc.classes = 10;
  vc.batch = 16;
  vc.image_size = 32;
  vc.dropout = 0.5f;
  vc.dropout_seed = 5;
  return vc;
}

float mean5(const std::vector<float>& v, size_t from) {
  float s = 0;
  for (size_t i = from; i < from + 5; ++i) s += v[i];
  return s / 5;
}

TEST(Vgg, FullVgg16HasTorchvisionParameterCount) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  VggConfig vc;  // VGG16, 1000 classes, 224x224 (the classifier's input is 512 * 7 * 7)
  vc.batch = 1;
  auto model = make_vgg(*be, vc);
  ParamStore store(*be, model->layers());
  EXPECT_EQ(store.parameter_count(), 138'357'544);
  EXPECT_EQ(vgg_parameter_count(vc), 138'357'544);
  // 32 parameter tensors with torchvision's names: features.N for the 13 convolutions,
  // classifier.0/.3/.6 for the linear layers.
  ASSERT_EQ(store.entries().size(), 32u);
  std::vector<std::string> names;
  for (Layer* l : model->layers())
    for (const auto& p : l->params()) names.push_back(p.name);
  EXPECT_EQ(names.front(), "features.0.weight");
  EXPECT_EQ(names[25], "features.28.bias");
  EXPECT_EQ(names[26], "classifier.0.weight");
  EXPECT_EQ(names.back(), "classifier.6.bias");
  for (Layer* l : model->layers())
    for (const auto& p : l->params())
      if (p.name == "classifier.0.weight") {
        EXPECT_EQ(p.dims, (Dims{4096, 25088}));
      }
}

TEST(Vgg, ImageSizeMustSuitFivePools) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  VggConfig vc = small();
  vc.image_size = 48;
  EXPECT_THROW(make_vgg(*be, vc), Error);
}

TEST(Vgg, LossFallsOnALearnableTask) {
  const auto vc = small();
  Rig s(vc, Precision::fp32, 1);
  const auto losses = s.train(vc, 100, 0.005f, 3);
  const float first = mean5(losses, 0), last = mean5(losses, 95);
  // ln(10) = 2.30 at chance; the classes differ by a per-channel offset. A plain VGG (no batch
  // norm) with dropout 0.5 learns noisily, so the means of five losses are compared. Stated
  // margin: the last five at least 15% below the first five (seen: about 23%).
  EXPECT_GT(first, 2.0f);
  EXPECT_LT(last, 0.85f * first) << "first " << first << " last " << last;
}

TEST(Vgg, SameSeedGivesBitIdenticalLosses) {
  const auto vc = small();
  Rig a(vc, Precision::fp32, 7), b(vc, Precision::fp32, 7);
  const auto la = a.train(vc, 5, 0.02f, 11), lb = b.train(vc, 5, 0.02f, 11);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  Rig c(vc, Precision::fp32, 8);
  EXPECT_NE(la, c.train(vc, 5, 0.02f, 11));
}

TEST(Vgg, Bf16TrainsWithFp32MasterWeights) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  const auto vc = small();
  Rig s(vc, Precision::bf16, 1);
  const auto losses = s.train(vc, 100, 0.005f, 3);
  const float first = mean5(losses, 0), last = mean5(losses, 95);
  EXPECT_LT(last, 0.85f * first) << "first " << first << " last " << last;
  bool fine = false;  // master weights stay f32: values bf16 cannot represent
  for (size_t i = 0; i < 1000 && !fine; ++i) {
    uint32_t bits;
    std::memcpy(&bits, s.store->values().data() + i, 4);
    fine = (bits & 0xFFFF) != 0;
  }
  EXPECT_TRUE(fine);
}

}  // namespace
}  // namespace dlperf
