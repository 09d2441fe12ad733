// Finite-difference checks of an op's backward (flashlight's Jacobian tests, in spirit).
//
// The scalar checked is L = sum_i r_i * y_i for a fixed random r (so every output element
// matters): the analytic gradients come from backward(dy = r); the numeric ones from
// central differences (L(v + eps) - L(v - eps)) / (2 eps) on a sample of input and
// parameter elements, perturbed through the canonical layout (Tensor::write,
// Layer::write_param), so blocked layouts are checked too.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "models/init.h"

namespace dlperf::testing {

inline std::vector<float> random_values(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline std::vector<float> read_all(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.read(v);
  return v;
}

struct GradCheck {
  double eps = 1e-2;        // perturbation (inputs are O(1))
  double atol = 2e-3;       // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 2e-2;
  size_t samples = 24;      // elements checked per tensor
};

// forward(): recomputes `y` from the current inputs and parameters.
// A checked tensor is perturbed in place; `analytic` holds its gradient (canonical layout).
class FiniteDifference {
 public:
  FiniteDifference(std::function<void()> forward, const Tensor& y, std::vector<float> r, GradCheck c = {})
      : forward_(std::move(forward)), y_(y), r_(std::move(r)), c_(c) {}

  double loss() {
    forward_();
    const auto y = read_all(y_);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(r_[i]) * y[i];
    return l;
  }

  // Checks d L / d x for a tensor input x against `analytic`.
  void check_input(const char* what, Tensor& x, const std::vector<float>& analytic) {
    auto base = read_all(x);
    check(what, base.size(), analytic, [&](size_t i, float v) {
      auto p = base;
      p[i] = v;
      x.write(p);
    }, [&](size_t i) { return base[i]; });
    x.write(base);
  }

  // Checks d L / d p for parameter `index` of `layer` against `analytic`.
  void check_param(const char* what, Layer& layer, size_t index, const std::vector<float>& analytic) {
    std::vector<float> base(static_cast<size_t>(product(layer.params()[index].dims)));
    layer.read_param(index, base);
    check(what, base.size(), analytic, [&](size_t i, float v) {
      auto p = base;
      p[i] = v;
      layer.write_param(index, p);
    }, [&](size_t i) { return base[i]; });
    layer.write_param(index, base);
  }

 private:
  void check(const char* what, size_t n, const std::vector<float>& analytic, const std::function<void(size_t, float)>& set,
             const std::function<float(size_t)>& get) {
    ASSERT_EQ(analytic.size(), n) << what;
    Rng pick(n * 7919 + 17);
    const size_t count = std::min(n, c_.samples);
    for (size_t s = 0; s < count; ++s) {
      const size_t i = count == n ? s : static_cast<size_t>(pick.next() % n);
      const float v = get(i);
      set(i, static_cast<float>(v + c_.eps));
      const double lp = loss();
      set(i, static_cast<float>(v - c_.eps));
      const double lm = loss();
      set(i, v);
      const double numeric = (lp - lm) / (2 * c_.eps);
      EXPECT_NEAR(analytic[i], numeric, c_.atol + c_.rtol * std::abs(numeric)) << what << " element " << i;
    }
  }

  std::function<void()> forward_;
  const Tensor& y_;
  std::vector<float> r_;
  GradCheck c_;
};

// Binds a layer's parameters to their own flat buffers (as ParamStore would) for op tests.
struct OwnedParams {
  std::vector<std::unique_ptr<Buffer>> values, grads;
  void bind(Backend& be, Layer& layer) {
    std::vector<ParamSlot> slots;
    for (const auto& p : layer.params()) {
      values.push_back(be.buffer(p.storage_elems));
      grads.push_back(be.buffer(p.storage_elems));
      slots.push_back({values.back()->data(), grads.back()->data()});
    }
    layer.bind(slots);
  }
  // Random canonical values for every parameter.
  static void randomize(Layer& layer, uint64_t seed, float lo = -0.5f, float hi = 0.5f) {
    for (size_t i = 0; i < layer.params().size(); ++i) {
      auto v = random_values(static_cast<size_t>(product(layer.params()[i].dims)), seed + i, lo, hi);
      layer.write_param(i, v);
    }
  }
  static std::vector<float> grad(const Layer& layer, size_t i) {
    std::vector<float> g(static_cast<size_t>(product(layer.params()[i].dims)));
    layer.read_grad(i, g);
    return g;
  }
};

}  // namespace dlperf::testing
