// Golden parity of the whole reduced ResNet v1.5 with an independent PyTorch implementation
// (tests/golden/make_resnet_fixture.py, float64 reference): the loss, every parameter's
// gradient, the batch-norm running statistics, and the losses of three SGD steps.
#include <gtest/gtest.h>

#include "../common/h5_fixture.h"
#include "models/resnet.h"
#include "train/optim/optimizer.h"
#include "train/param_store.h"

namespace dlperf::testing {
namespace {

class ResNetGolden : public ::testing::Test {
 protected:
  H5Fixture fx{std::string(DLPERF_GOLDEN_DIR) + "/resnet_reduced.h5"};
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  std::unique_ptr<Model> model;
  std::unique_ptr<ParamStore> store;
  HostBatch batch;

  void SetUp() override {
    ResNetConfig rc;
    const auto blocks = fx.attribute("/", "blocks");
    for (size_t i = 0; i < 4; ++i) rc.blocks[i] = static_cast<int>(blocks.at(i));
    rc.width = static_cast<int64_t>(fx.attribute("/", "width")[0]);
    rc.classes = static_cast<int64_t>(fx.attribute("/", "classes")[0]);
    rc.batch = static_cast<int64_t>(fx.attribute("/", "batch")[0]);
    rc.image_size = static_cast<int64_t>(fx.attribute("/", "image_size")[0]);
    rc.label_smoothing = static_cast<float>(fx.attribute("/", "label_smoothing")[0]);
    model = make_resnet(*be, rc);
    store = std::make_unique<ParamStore>(*be, model->layers());
    for (Layer* l : model->layers())
      for (size_t i = 0; i < l->params().size(); ++i) l->write_param(i, fx.floats("/params/" + l->params()[i].name));
    batch.floats["images"] = fx.floats("/input");
    batch.ints["labels"] = fx.ints("/labels");
  }

  float step_loss() {
    model->load(batch);
    for (Layer* l : model->layers()) l->refresh_compute_weights();
    model->forward();
    return model->loss();
  }
};

TEST_F(ResNetGolden, LossAndEveryGradientMatchPyTorch) {
  const float loss = step_loss();
  EXPECT_NEAR(loss, fx.scalar("/loss"), 1e-5 * std::max(1.0f, std::abs(fx.scalar("/loss"))));
  model->backward(1.0f, [](const Layer&) {});
  int checked = 0;
  for (Layer* l : model->layers()) {
    for (size_t i = 0; i < l->params().size(); ++i) {
      const std::string name = "/grads/" + l->params()[i].name;
      const auto ref = fx.floats(name);
      std::vector<float> got(ref.size());
      l->read_grad(i, got);
      EXPECT_LE(max_abs_diff(got, ref), fx.tolerance(name, ref)) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 + 4 * 12 + 2);  // stem conv + bn (2); per block 3 convs, 3 bns, downsample conv + bn; fc (2)
}

TEST_F(ResNetGolden, BatchNormRunningStatisticsMatchPyTorch) {
  step_loss();
  for (Layer* l : model->layers()) {
    auto* bn = dynamic_cast<BatchNorm*>(l);
    if (!bn) continue;
    std::string name = l->params()[0].name;  // "<bn>.weight"
    name = name.substr(0, name.size() - std::string(".weight").size());
    const auto ref_mean = fx.floats("/buffers/" + name + ".running_mean");
    const auto ref_var = fx.floats("/buffers/" + name + ".running_var");
    std::vector<float> mean(ref_mean.size()), var(ref_var.size());
    bn->read_running_stats(mean, var);
    EXPECT_LE(max_abs_diff(mean, ref_mean), 1e-4) << name;
    EXPECT_LE(max_abs_diff(var, ref_var), 1e-3) << name;
  }
}

TEST_F(ResNetGolden, ThreeSgdStepsMatchPyTorch) {
  const auto ref = fx.floats("/steps/losses");
  const float lr = static_cast<float>(fx.attribute("/", "lr")[0]);
  Sgd sgd(*be, *store, SgdConfig{static_cast<float>(fx.attribute("/", "momentum")[0]),
                                 static_cast<float>(fx.attribute("/", "weight_decay")[0])});
  for (size_t s = 0; s < ref.size(); ++s) {
    const float loss = step_loss();
    EXPECT_NEAR(loss, ref[s], 1e-3 * std::abs(ref[s])) << "step " << s;
    model->backward(1.0f, [](const Layer&) {});
    sgd.step(lr, 1.0f);
  }
}

}  // namespace
}  // namespace dlperf::testing
