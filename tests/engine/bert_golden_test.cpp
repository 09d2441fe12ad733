// Golden parity of the BERT pretraining model with PyTorch (tests/golden/make_bert_fixture.py,
// tests/golden/README.md): a 2-layer BERT, hidden 64, dropout off, loaded with the fixture's
// weights and batch; the masked-LM, next-sentence and total losses, every parameter gradient
// (the tied word table's included: the sum of its embedding and decoder uses) and three AdamW
// step losses must match. Tolerances per tensor from the fixture's own fp32-vs-fp64 spread:
// max |x - ref| <= max(1e-4, 20 * fp32_max_rel_diff) * max |ref| (README's rule).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/bert.h"
#include "trace/h5_handle.h"
#include "train/optim/adam.h"
#include "train/param_store.h"

namespace dlperf {
namespace {

const std::string kFixture = std::string(DLPERF_GOLDEN_DIR) + "/bert_reduced.h5";

class Fixture {
 public:
  Fixture() : file_(DLPERF_H5(H5Fopen(kFixture.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose)) {}

  std::vector<float> floats(const std::string& path) const {
    auto d = DLPERF_H5(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
    std::vector<float> v(elements(d));
    DLPERF_CHECK_HDF5(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
    return v;
  }
  std::vector<int32_t> ints(const std::string& path) const {
    auto d = DLPERF_H5(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
    std::vector<int32_t> v(elements(d));
    DLPERF_CHECK_HDF5(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
    return v;
  }
  double attr(const std::string& path, const char* name, double fallback = 0.0) const {
    auto d = DLPERF_H5(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
    if (H5Aexists(d, name) <= 0) return fallback;
    auto a = DLPERF_H5(H5Aopen(d, name, H5P_DEFAULT), H5Aclose);
    double v = 0;
    DLPERF_CHECK_HDF5(H5Aread(a, H5T_NATIVE_DOUBLE, &v));
    return v;
  }

 private:
  static size_t elements(hid_t d) {
    auto s = DLPERF_H5(H5Dget_space(d), H5Sclose);
    return static_cast<size_t>(H5Sget_simple_extent_npoints(s));
  }
  h5::Handle file_;
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

class BertGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg.layers = 2, cfg.hidden = 64, cfg.heads = 4, cfg.intermediate = 256, cfg.vocab = 128, cfg.positions = 64;
    cfg.token_types = 2, cfg.batch = 2, cfg.seq_len = 16, cfg.max_predictions = 3, cfg.dropout = 0.0f;
    model = make_bert(*be, cfg);
    store = std::make_unique<ParamStore>(*be, model->layers());
    for (const auto& e : store->entries()) {
      const auto& p = e.layer->params()[e.index];
      e.layer->write_param(e.index, fx.floats("/params/" + p.name));
    }
    for (const char* name : kBertInputs) batch.ints[name] = fx.ints(std::string("/") + name);
    model->load(batch);
  }

  void step_forward() {
    for (Layer* l : model->layers()) l->refresh_compute_weights();
    model->forward();
  }

  Fixture fx;
  std::unique_ptr<Backend> be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  BertConfig cfg;
  std::unique_ptr<BertModel> model;
  std::unique_ptr<ParamStore> store;
  HostBatch batch;
};

TEST_F(BertGolden, ParameterNamesAndCountMatchPyTorch) {
  EXPECT_EQ(store->parameter_count(), 121218);  // README: 121,218 parameters (tied decoder once)
  EXPECT_EQ(bert_parameter_count(cfg), 121218);
  EXPECT_EQ(store->entries().size(), 2u * 16u + 5u + 9u);  // every /params entry, the word table once
}

TEST_F(BertGolden, LossesAndEveryGradientMatch) {
  step_forward();
  const double mlm = fx.floats("/loss/mlm")[0], nsp = fx.floats("/loss/nsp")[0], total = fx.floats("/loss/total")[0];
  EXPECT_NEAR(model->mlm_loss(), mlm, 2e-5 * std::abs(mlm) + 1e-6);
  EXPECT_NEAR(model->nsp_loss(), nsp, 2e-5 * std::abs(nsp) + 1e-6);
  EXPECT_NEAR(model->loss(), total, 2e-5 * std::abs(total) + 1e-6);
  model->backward(1.0f, [](const Layer&) {});
  const auto grads = store->read_grads();
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < grads.size(); ++i) {
    const auto& e = store->entries()[i];
    const std::string path = "/grads/" + e.layer->params()[e.index].name;
    const auto ref = fx.floats(path);
    ASSERT_EQ(grads[i].size(), ref.size()) << path;
    double diff = 0;
    for (size_t j = 0; j < ref.size(); ++j) diff = std::max(diff, std::abs(static_cast<double>(grads[i][j]) - ref[j]));
    if (fx.attr(path, "analytically_zero") > 0) {
      EXPECT_LT(diff, 1e-5) << path << " (zero in exact arithmetic)";
      continue;
    }
    const double scale = max_abs(ref);
    const double tol = std::max(1e-4, 20 * fx.attr(path, "fp32_max_rel_diff")) * scale;
    EXPECT_LE(diff, tol) << path << " max |ref| " << scale;
    if (diff / scale > worst) worst = diff / scale, worst_name = path;
  }
  std::printf("worst relative gradient difference %.2e (%s)\n", worst, worst_name.c_str());
}

TEST_F(BertGolden, AdamWStepLossesMatch) {
  AdamW opt(*be, *store, {0.9f, 0.999f, 1e-6f, 0.01f});  // the fixture's torch.optim.AdamW settings, lr 1e-3
  const auto ref = fx.floats("/steps/losses");
  for (size_t s = 0; s < ref.size(); ++s) {
    step_forward();
    EXPECT_NEAR(model->loss(), ref[s], 1e-3 * std::abs(ref[s])) << "step " << s;
    model->backward(1.0f, [](const Layer&) {});
    opt.step(1e-3f, 1.0f);
  }
}

}  // namespace
}  // namespace dlperf
