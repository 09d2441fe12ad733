// Golden parity of the whole reduced VGG16 (configuration D, widths /16, 64x64 input, so the
// classifier reads a (C, 2, 2) map) with an independent PyTorch implementation
// (tests/golden/make_vgg_fixture.py, float64 reference): the features, the logits, the loss,
// every parameter's gradient, and the losses of three SGD steps.
#include <gtest/gtest.h>

#include "../common/h5_fixture.h"
#include "models/vgg.h"
#include "train/optim/optimizer.h"
#include "train/param_store.h"

namespace dlperf::testing {
namespace {

class VggGolden : public ::testing::Test {
 protected:
  H5Fixture fx{std::string(DLPERF_GOLDEN_DIR) + "/vgg_reduced.h5"};
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  std::unique_ptr<Model> model;
  std::unique_ptr<ParamStore> store;
  HostBatch batch;

  VggConfig config() const {
    VggConfig c;
    c.width = 64 / static_cast<int64_t>(fx.attribute("/", "width_divisor")[0]);
    c.hidden = static_cast<int64_t>(fx.attribute("/", "hidden")[0]);
    c.classes = static_cast<int64_t>(fx.attribute("/", "classes")[0]);
    c.batch = static_cast<int64_t>(fx.attribute("/", "batch")[0]);
    c.image_size = static_cast<int64_t>(fx.attribute("/", "image_size")[0]);
    c.dropout = static_cast<float>(fx.attribute("/", "dropout")[0]);
    c.label_smoothing = static_cast<float>(fx.attribute("/", "label_smoothing")[0]);
    return c;
  }

  void SetUp() override {
    model = make_vgg(*be, config());
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

TEST_F(VggGolden, ParameterNamesShapesAndCountMatchTheFixture) {
  const auto c = config();
  EXPECT_EQ(store->parameter_count(), vgg_parameter_count(c));
  EXPECT_EQ(store->parameter_count(), 70'894);  // tests/golden/README.md
  int params = 0;
  for (Layer* l : model->layers())
    for (const auto& p : l->params()) {
      EXPECT_EQ(product(p.dims), static_cast<int64_t>(fx.floats("/params/" + p.name).size())) << p.name;
      ++params;
    }
  EXPECT_EQ(params, 2 * 13 + 2 * 3);  // 13 convolutions and 3 linear layers, weight and bias each
}

TEST_F(VggGolden, LossAndEveryGradientMatchPyTorch) {
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
  EXPECT_EQ(checked, 2 * 13 + 2 * 3);
}

TEST_F(VggGolden, ThreeSgdStepsMatchPyTorch) {
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
