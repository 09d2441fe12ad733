// One fp32 step, twice, of a model built by `make` on a backend, and a bitwise comparison of
// the gradients, loss and batch-norm running statistics of two such runs (--recompute block
// against none): shared by tests/train/recompute_test.cpp (cpu) and
// tests/cuda/recompute_conformance_test.cpp (cuda, skips without a GPU).
#pragma once

#include <gtest/gtest.h>

#include <cstring>

#include "models/model.h"
#include "train/feed/data_source.h"
#include "train/param_store.h"

namespace dlperf::recompute_test {

struct StepResult {
  std::vector<std::vector<float>> grads;   // canonical, flat order
  std::vector<std::vector<float>> running;  // every batch norm's running mean and variance
  float loss = 0;
};

// Two steps from the same parameters and batches: the second step's gradients, so a running
// statistic or dropout counter that the recomputed forward moved would show.
template <class MakeModel>
StepResult step(MakeModel make, DataSource& data, BackendKind kind = BackendKind::cpu) {
  auto be = make_backend(kind, {Precision::fp32, 2, 0});
  std::unique_ptr<Model> model = make(*be);
  ParamStore store(*be, model->layers());
  model->init_params(7);
  StepResult r;
  for (int s = 0; s < 2; ++s) {
    model->load(data.next());
    model->forward();
    model->backward(LossGradScale(1.0f), [](const Layer&) {});
    r.loss = model->loss();
  }
  r.grads = store.read_grads();
  for (Layer* l : model->layers())
    if (auto* bn = dynamic_cast<BatchNorm*>(l)) {
      const size_t c = static_cast<size_t>(bn->params()[0].dims[0]);
      std::vector<float> mean(c), var(c);
      bn->read_running_stats(mean, var);
      r.running.push_back(mean);
      r.running.push_back(var);
    }
  return r;
}

inline void expect_bitwise(const StepResult& a, const StepResult& b) {
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].size(), b.grads[i].size());
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)), 0) << "gradient " << i;
  }
  ASSERT_EQ(a.running.size(), b.running.size());
  for (size_t i = 0; i < a.running.size(); ++i)
    EXPECT_EQ(std::memcmp(a.running[i].data(), b.running[i].data(), a.running[i].size() * sizeof(float)), 0) << "running stat " << i;
}

}  // namespace dlperf::recompute_test
