// ResNet v1.5 as a whole: parameter count of the full model, loss falls on a learnable task,
// the same seed gives bit-identical losses, and bf16 trains too.
#include <gtest/gtest.h>

#include <cstring>

#include "models/resnet.h"
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

  Rig(const ResNetConfig& rc, Precision p, uint64_t seed, float momentum = 0.875f, float wd = 3e-5f) {
    be = make_backend(BackendKind::cpu, {p, 2, 0});
    model = make_resnet(*be, rc);
    store = std::make_unique<ParamStore>(*be, model->layers());
    model->init_params(seed);
    sgd = std::make_unique<Sgd>(*be, *store, SgdConfig{momentum, wd});
  }

  std::vector<float> train(const ResNetConfig& rc, int64_t iterations, float lr, uint64_t seed) {
    TrainConfig tc;
    tc.iterations = iterations;
    tc.warmup = 0;
    tc.print_every = 0;
    tc.lr = {LrScheduleKind::constant, lr, 0, iterations};
    SyntheticImages data(rc.batch, rc.image_size, rc.classes, seed, 8);
    Trainer t(*model, *be, *sgd, tc);
    RankTrace trace;
    t.run(data, nullptr, trace, {}, nullptr);
    std::vector<float> losses;
    for (const auto& it : trace.iterations) losses.push_back(it.loss);
    return losses;
  }
};

ResNetConfig small() {
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1};
  rc.width = 8;
  rc.classes = 10;
  rc.batch = 16;
  rc.image_size = 32;
  return rc;
}

TEST(ResNet, FullResNet50HasTorchvisionParameterCount) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  ResNetConfig rc;  // ResNet-50 v1.5, 1000 classes
  rc.batch = 1;
  rc.image_size = 32;  // the count does not depend on the image size
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  EXPECT_EQ(store.parameter_count(), 25'557'032);
  // 161 parameter tensors: 53 convs, 53 batch norms (2 each), fc weight and bias.
  EXPECT_EQ(store.entries().size(), 53u + 2 * 53u + 2u);
}

TEST(ResNet, StrideSitsOnTheThreeByThreeConvolution) {
  // v1.5: layer2.0.conv1 is 1x1 stride 1, conv2 3x3 stride 2. A 32x32 input reaches layer2
  // at 8x8 and leaves it at 4x4 - checked through the shapes the planner accepted and the
  // parameter names/shapes.
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  auto model = make_resnet(*be, small());
  bool seen = false;
  for (Layer* l : model->layers())
    for (const auto& p : l->params())
      if (p.name == "layer2.0.conv2.weight") {
        EXPECT_EQ(p.dims, (Dims{16, 16, 3, 3}));
        seen = true;
      } else if (p.name == "layer2.0.downsample.0.weight") {
        EXPECT_EQ(p.dims, (Dims{64, 32, 1, 1}));  // 4W = 32 in, 4 * 2W = 64 out
      }
  EXPECT_TRUE(seen);
}

TEST(ResNet, LossFallsOnALearnableTask) {
  const auto rc = small();
  Rig s(rc, Precision::fp32, 1);
  const auto losses = s.train(rc, 40, 0.03f, 3);
  const float first = (losses[0] + losses[1] + losses[2]) / 3;
  const float last = (losses[37] + losses[38] + losses[39]) / 3;
  // ln(10) = 2.30 at chance; the classes differ by a per-channel offset. Stated margin: the
  // mean of the last three losses is at least 25% below the mean of the first three.
  EXPECT_GT(first, 1.9f);
  EXPECT_LT(last, 0.75f * first) << "first " << first << " last " << last;
}

TEST(ResNet, SameSeedGivesBitIdenticalLosses) {
  const auto rc = small();
  Rig a(rc, Precision::fp32, 7), b(rc, Precision::fp32, 7);
  const auto la = a.train(rc, 6, 0.05f, 11), lb = b.train(rc, 6, 0.05f, 11);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  // and a different seed gives a different run
  Rig c(rc, Precision::fp32, 8);
  EXPECT_NE(la, c.train(rc, 6, 0.05f, 11));
}

TEST(ResNet, Bf16TrainsWithFp32MasterWeights) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  const auto rc = small();
  Rig s(rc, Precision::bf16, 1);
  const auto losses = s.train(rc, 40, 0.03f, 3);
  const float first = (losses[0] + losses[1] + losses[2]) / 3;
  const float last = (losses[37] + losses[38] + losses[39]) / 3;
  EXPECT_LT(last, 0.75f * first) << "first " << first << " last " << last;
  // master weights stay f32: the flat buffer holds values that bf16 cannot represent
  bool fine = false;
  for (size_t i = 0; i < 1000 && !fine; ++i) {
    uint32_t bits;
    std::memcpy(&bits, s.store->values().data() + i, 4);
    fine = (bits & 0xFFFF) != 0;
  }
  EXPECT_TRUE(fine);
}

TEST(ResNet, DynamicLossScalingSkipsOverflowingStepsAndRecovers) {
  const auto rc = small();
  for (const float initial : {3e38f, 1024.0f}) {
    Rig s(rc, Precision::fp32, 1);
    std::vector<float> before(s.store->size());
    s.store->values().read(before);
    TrainConfig tc;
    tc.iterations = 1;
    tc.warmup = 0;
    tc.print_every = 0;
    tc.lr = {LrScheduleKind::constant, 0.03f, 0, 1};
    tc.loss_scale = {LossScaling::dynamic, initial, 2000};
    SyntheticImages data(rc.batch, rc.image_size, rc.classes, 3);
    Trainer t(*s.model, *s.be, *s.sgd, tc, &s.store->grads());
    RankTrace trace;
    t.run(data, nullptr, trace, {}, nullptr);
    std::vector<float> after(s.store->size());
    s.store->values().read(after);
    if (initial > 1e30f) {
      EXPECT_EQ(before, after) << "an overflowing step must be skipped";
    } else {
      EXPECT_NE(before, after) << "a finite step must update the parameters";
    }
  }
}

}  // namespace
}  // namespace dlperf
