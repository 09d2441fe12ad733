// Deterministic parameter initialisation, the same on every platform and rank: a
// counter-based generator (SplitMix64) feeds uniform and Box-Muller normal draws, so one
// seed always gives the same weights.
#pragma once

#include <cstdint>
#include <span>

namespace dlperf {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  float uniform(float lo, float hi);  // [lo, hi)
  float normal(float mean, float stddev);

 private:
  uint64_t state_;
};

// Kaiming normal with fan_out and ReLU gain (torchvision's ResNet/VGG convolutions).
void kaiming_normal_fan_out(std::span<float> w, int64_t fan_out, Rng& rng);
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's nn.Linear default for weight and bias.
void uniform_fan_in(std::span<float> w, int64_t fan_in, Rng& rng);
void normal_init(std::span<float> w, float stddev, Rng& rng);
void fill(std::span<float> w, float value);

}  // namespace dlperf
